#!/usr/bin/env python3
"""Print per-TCP-connection facts of the client captures, derived with tshark.

Companion of scripts/capture-facts.py for the files made by
scripts/record-client-captures.sh (Java, HTTP/2, h2c, pipelining, chunked,
python-requests over TLS). Needs `tshark` in PATH.

  scripts/client-capture-facts.py captures/java-*.pcap captures/h2*.pcap ...

The protocol on the server port is sniffed from the first client payload:
TLS record (0x16 0x03) -> `-d tcp.port==P,tls`, HTTP/2 connection preface
("PRI * HTTP/2.0") -> `-d tcp.port==P,http2`, anything else -> HTTP/1.x.
If FILE.keylog (same basename) exists it is passed as tls.keylog_file, so
HTTP/1.1 and HTTP/2 inside TLS are counted too; without it (Java) only the
cleartext part of the handshake is visible.

Per file: number of TCP connections, HTTP/1.x requests, HTTP/2 request
HEADERS, HEADERS frames in total (`http2.type==1`), peak number of
concurrent TCP connections: "open" = from its SYN to its last packet,
"active" = from its SYN to its first FIN or RST.
Per connection: endpoints, packets, HTTP/1.x requests + status codes +
versions + Transfer-Encoding, HTTP/2 stream ids + :status, TLS version chosen
by the server, number of ClientHellos, resumed or not (TLS 1.3: ServerHello
carries pre_shared_key; TLS 1.2: no Certificate message after ServerHello),
whether a Certificate message was seen (TLS 1.3 Certificates are encrypted,
so without a keylog this prints "enc"), ALPN offered/selected, SNI, number of
NewSessionTickets (TLS 1.3: needs keylog), who sent the first close_notify
(needs keylog for 1.3), and the FIN/RST order.
"""
import collections
import os
import subprocess
import sys

SEP = "\t"


def tshark(path, fields, dfilter=None, extra=()):
    cmd = ["tshark", "-r", path, "-T", "fields", "-E", "separator=/t",
           "-E", "occurrence=a", "-E", "aggregator=,"]
    cmd += list(extra)
    if dfilter:
        cmd += ["-Y", dfilter]
    for f in fields:
        cmd += ["-e", f]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    rows = []
    for line in out.splitlines():
        cols = line.split(SEP)
        cols += [""] * (len(fields) - len(cols))
        rows.append(dict(zip(fields, cols)))
    return rows


def split(v):
    return [x for x in v.split(",") if x != ""]


def tls_version_name(v):
    return {"0x0304": "TLS1.3", "0x0303": "TLS1.2", "0x0302": "TLS1.1",
            "0x0301": "TLS1.0"}.get(v, v)


def endpoint(r):
    return "%s:%s" % (r["ip.src"] or "[%s]" % r["ipv6.src"], r["tcp.srcport"])


def facts(path):
    base = path.rsplit(".", 1)[0]
    keylog = base + ".keylog"

    pk = tshark(path, ["frame.number", "frame.time_relative", "tcp.stream",
                       "ip.src", "ipv6.src", "tcp.srcport", "ip.dst", "ipv6.dst",
                       "tcp.dstport", "tcp.flags.syn", "tcp.flags.ack",
                       "tcp.flags.fin", "tcp.flags.reset", "tcp.len", "tcp.payload"])
    streams = collections.OrderedDict()
    first_payload = None
    for r in pk:
        s = int(r["tcp.stream"])
        t = float(r["frame.time_relative"])
        st = streams.setdefault(s, {"packets": 0, "client": None, "server": None,
                                    "syn": False, "synack": False, "closes": [],
                                    "start": t, "end": t})
        st["packets"] += 1
        st["end"] = t
        src = endpoint(r)
        dst = "%s:%s" % (r["ip.dst"] or "[%s]" % r["ipv6.dst"], r["tcp.dstport"])
        syn, ack = r["tcp.flags.syn"] in ("1", "True"), r["tcp.flags.ack"] in ("1", "True")
        fin, rst = r["tcp.flags.fin"] in ("1", "True"), r["tcp.flags.reset"] in ("1", "True")
        if syn and not ack:
            st["syn"] = True
            st["client"], st["server"] = src, dst
        elif syn and ack:
            st["synack"] = True
        if fin or rst:
            st.setdefault("first_close", t)
            who = "client" if src == st["client"] else "server"
            st["closes"].append("%s %s" % (who, "RST" if rst else "FIN"))
        if first_payload is None and r["tcp.len"] not in ("", "0") and src == st["client"]:
            first_payload = bytes.fromhex(r["tcp.payload"].replace(":", ""))

    sport = next(iter(streams.values()))["server"].rsplit(":", 1)[1]
    extra = []
    proto = "http"
    if first_payload is not None and first_payload[:2] == b"\x16\x03":
        proto = "tls"
        extra += ["-d", "tcp.port==%s,tls" % sport]
        if os.path.exists(keylog):
            extra += ["-o", "tls.keylog_file:%s" % keylog]
    elif first_payload is not None and first_payload.startswith(b"PRI * HTTP/2.0"):
        proto = "h2c"
        extra += ["-d", "tcp.port==%s,http2" % sport]

    # HTTP/1.x
    reqs = collections.defaultdict(list)
    for r in tshark(path, ["tcp.stream", "http.request.method", "http.request.uri",
                           "http.request.version"], "http.request", extra):
        for m, u, v in zip(split(r["http.request.method"]), split(r["http.request.uri"]),
                           split(r["http.request.version"])):
            reqs[int(r["tcp.stream"])].append("%s %s %s" % (m, u, v))
    codes = collections.defaultdict(list)
    te = collections.defaultdict(set)
    for r in tshark(path, ["tcp.stream", "http.response.code", "http.response.version",
                           "http.transfer_encoding"], "http.response", extra):
        s = int(r["tcp.stream"])
        for c, v in zip(split(r["http.response.code"]), split(r["http.response.version"])):
            codes[s].append("%s(%s)" % (c, v))
        for x in split(r["http.transfer_encoding"]):
            te[s].add(x)

    # HTTP/2: HEADERS frames (type 1). Client HEADERS carry :method, server
    # HEADERS carry :status; pair them with the stream ids of the type-1 frames.
    h2_headers_frames = 0
    h2req = collections.defaultdict(list)
    h2resp = collections.defaultdict(list)
    for r in tshark(path, ["tcp.stream", "ip.src", "ipv6.src", "tcp.srcport",
                           "http2.type", "http2.streamid", "http2.headers.method",
                           "http2.headers.path", "http2.headers.status"],
                    "http2.type==1", extra):
        s = int(r["tcp.stream"])
        types, sids = split(r["http2.type"]), split(r["http2.streamid"])
        hsids = [sid for ty, sid in zip(types, sids) if ty == "1"]
        h2_headers_frames += len(hsids)
        if endpoint(r) == streams[s]["client"]:
            for sid, m, p in zip(hsids, split(r["http2.headers.method"]),
                                 split(r["http2.headers.path"])):
                h2req[s].append("stream %s: %s %s" % (sid, m, p))
        else:
            for sid, c in zip(hsids, split(r["http2.headers.status"])):
                h2resp[s].append("%s@%s" % (c, sid))

    # TLS
    tls = collections.defaultdict(dict)
    if proto == "tls":
        for r in tshark(path, ["tcp.stream", "ip.src", "ipv6.src", "tcp.srcport",
                               "tls.handshake.type", "tls.handshake.version",
                               "tls.handshake.extensions.supported_version",
                               "tls.handshake.extension.type",
                               "tls.handshake.extensions_alpn_str",
                               "tls.handshake.extensions_server_name"],
                        "tls.handshake", extra):
            s = int(r["tcp.stream"])
            types = split(r["tls.handshake.type"])
            t = tls[s]
            from_client = endpoint(r) == streams[s]["client"]
            t.setdefault("types", []).extend(types)
            if "1" in types:
                t["ch"] = t.get("ch", 0) + 1
                t["ch_psk"] = "41" in split(r["tls.handshake.extension.type"])
                t["alpn_offered"] = "/".join(split(r["tls.handshake.extensions_alpn_str"])) or "-"
                t["sni"] = r["tls.handshake.extensions_server_name"] or "-"
            elif not from_client and r["tls.handshake.extensions_alpn_str"]:
                # ServerHello (TLS 1.2) or EncryptedExtensions (TLS 1.3, keylog)
                t["alpn"] = r["tls.handshake.extensions_alpn_str"]
            if "2" in types:
                sv = split(r["tls.handshake.extensions.supported_version"])
                hv = split(r["tls.handshake.version"])
                t["version"] = tls_version_name(sv[0] if sv else hv[0])
                t["sh_psk"] = "41" in split(r["tls.handshake.extension.type"])
        close_notify = {}
        for r in tshark(path, ["tcp.stream", "ip.src", "ipv6.src", "tcp.srcport"],
                        "tls.alert_message.desc == 0", extra):
            s = int(r["tcp.stream"])
            close_notify.setdefault(s, "client" if endpoint(r) == streams[s]["client"] else "server")
        # With a keylog: decrypted application_data records (content_type 23).
        # Without: every encrypted TLS 1.3 record (opaque_type 23: Finished,
        # tickets, data and alerts alike) plus TLS 1.2 application data.
        rec_field = "tls.record.content_type" if "-o" in extra else "tls.record.opaque_type"
        appdata = collections.defaultdict(lambda: [0, 0])
        for r in tshark(path, ["tcp.stream", "ip.src", "ipv6.src", "tcp.srcport",
                               "tls.record.content_type", "tls.record.opaque_type"],
                        "tls.record", extra):
            s = int(r["tcp.stream"])
            n = split(r[rec_field]).count("23")
            if "-o" not in extra:
                n += split(r["tls.record.content_type"]).count("23")
            appdata[s][0 if endpoint(r) == streams[s]["client"] else 1] += n
    else:
        close_notify, appdata = {}, {}

    # Server-side ground truth written by record-client-captures.sh for the
    # Java captures: FILE.nginx-access.log, one line per request,
    # "127.0.0.1:PORT conn=N conn_req=K ... reused=r|." (r = TLS resumed).
    nginx = collections.defaultdict(list)
    alog = base + ".nginx-access.log"
    if os.path.exists(alog):
        with open(alog) as f:
            for line in f:
                parts = line.split()
                port = parts[0].rsplit(":", 1)[1]
                reused = [p for p in parts if p.startswith("reused=")]
                status = parts[parts.index("HTTP/1.1\"") + 1] if "HTTP/1.1\"" in parts else "?"
                nginx[port].append((status, reused[0][7:] if reused else "?"))

    # peak concurrency: sweep over [start, end] intervals. "open": SYN to
    # last packet; "active": SYN to the first FIN/RST (a closing connection
    # whose last FIN/ACK/RST overlaps the next SYN counts as open, not active).
    def peak_of(end_key):
        events = []
        for st in streams.values():
            events.append((st["start"], 1))
            events.append((st.get(end_key, st["end"]), -1))
        events.sort(key=lambda e: (e[0], e[1]))   # at equal times, close first
        cur = best = 0
        for _, d in events:
            cur += d
            best = max(best, cur)
        return best
    peak = peak_of("end")
    peak_active = peak_of("first_close")

    print("== %s" % os.path.basename(path))
    total_req = sum(len(v) for v in reqs.values())
    total_h2 = sum(len(v) for v in h2req.values())
    if os.path.exists(alog):
        print("   nginx_access_log: %d requests" % sum(len(v) for v in nginx.values()))
    print("   proto=%s%s tcp_connections=%d http1_requests=%d http2_requests=%d "
          "http2_headers_frames=%d peak_concurrent_open=%d peak_concurrent_active=%d" % (
              proto, "+keylog" if "-o" in extra else "", len(streams), total_req,
              total_h2, h2_headers_frames, peak, peak_active))
    summary = collections.Counter()
    for s, st in streams.items():
        line = "   stream %d: %s -> %s pkts=%d t=%.3f..%.3f handshake=%s" % (
            s, st["client"], st["server"], st["packets"], st["start"], st["end"],
            "SYN,SYN-ACK" if st["syn"] and st["synack"] else "incomplete")
        if reqs[s] or proto == "http":
            line += " requests=%d" % len(reqs[s])
        if codes[s]:
            line += " status=%s" % ",".join(codes[s])
        if te[s]:
            line += " transfer_encoding=%s" % ",".join(sorted(te[s]))
        if h2req[s] or h2resp[s]:
            line += " h2_requests=%d h2_status=%s" % (len(h2req[s]), ",".join(h2resp[s]))
        if s in tls:
            t = tls[s]
            types = t.get("types", [])
            if t.get("version") == "TLS1.3":
                resumed = t.get("sh_psk", False)
                if "11" in types:
                    cert = "yes"
                elif "-o" in extra:
                    cert = "no"
                else:
                    cert = "enc"
            else:
                resumed = "2" in types and "11" not in types
                cert = "yes" if "11" in types else "no"
            summary["%s %s" % (t.get("version", "?"), "resumed" if resumed else "full")] += 1
            line += " tls=%s client_hellos=%d resumed=%s ch_psk=%s certificate=%s" % (
                t.get("version", "?"), t.get("ch", 0), "yes" if resumed else "no",
                "yes" if t.get("ch_psk") else "no", cert)
            line += " sni=%s alpn_offered=%s alpn=%s" % (
                t.get("sni", "-"), t.get("alpn_offered", "-"),
                t.get("alpn", "?" if t.get("version") == "TLS1.3" and "-o" not in extra else "-"))
            line += " new_session_tickets=%s" % (
                types.count("4") if (t.get("version") != "TLS1.3" or "-o" in extra) else "enc")
            line += " %s=c%d/s%d" % (("appdata_records" if "-o" in extra else "encrypted_records",)
                                     + tuple(appdata[s]))
        if s in close_notify:
            line += " first_close_notify=%s" % close_notify[s]
        cport = st["client"].rsplit(":", 1)[1] if st["client"] else None
        if os.path.exists(alog):
            n = nginx.get(cport, [])
            line += " nginx_requests=%d nginx_status=%s nginx_tls_reused=%s" % (
                len(n), ",".join(x[0] for x in n) or "-", ",".join(sorted({x[1] for x in n})) or "-")
        line += " close=[%s]" % ", ".join(st["closes"])
        print(line)
        for q in reqs[s]:
            print("      %s" % q)
        for q in h2req[s]:
            print("      %s" % q)
    if summary:
        print("   tls_handshakes: %s" % ", ".join("%s x%d" % kv for kv in sorted(summary.items())))


def main():
    for p in sys.argv[1:]:
        facts(p)


if __name__ == "__main__":
    main()
