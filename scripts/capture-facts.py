#!/usr/bin/env python3
"""Print per-TCP-connection facts of capture files, derived with tshark.

Used to check the captures made by record-captures.sh and to write
captures/README.md. Needs `tshark` in PATH.

  scripts/capture-facts.py captures/*.pcap captures/*.pcapng

For each file and each TCP stream (tshark's tcp.stream index, ordered by
first packet) it prints: client and server endpoints, whether the 3-way
handshake was seen, the HTTP request methods/URIs and response codes, the TLS
version chosen by the server, whether the TLS session was resumed, who sent
the first TLS close_notify alert (needs the keylog for TLS 1.3), and the
order of FIN / RST segments.

TLS captures (file name starting with "tls") are decoded as TLS on the server
port; if FILE.keylog (same basename) exists it is used to decrypt, so HTTP
inside TLS is counted too.
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


def tls_version_name(v):
    return {"0x0304": "TLS1.3", "0x0303": "TLS1.2", "0x0302": "TLS1.1",
            "0x0301": "TLS1.0"}.get(v, v)


def facts(path):
    base = path.rsplit(".", 1)[0]
    is_tls = os.path.basename(path).startswith("tls")
    keylog = base + ".keylog"

    pk = tshark(path, ["frame.number", "tcp.stream", "ip.src", "ipv6.src",
                       "tcp.srcport", "ip.dst", "ipv6.dst", "tcp.dstport",
                       "tcp.flags.syn", "tcp.flags.ack", "tcp.flags.fin",
                       "tcp.flags.reset"])
    streams = collections.OrderedDict()
    for r in pk:
        s = int(r["tcp.stream"])
        st = streams.setdefault(s, {"packets": 0, "client": None, "server": None,
                                    "syn": False, "synack": False, "closes": []})
        st["packets"] += 1
        src = "%s:%s" % (r["ip.src"] or "[%s]" % r["ipv6.src"], r["tcp.srcport"])
        dst = "%s:%s" % (r["ip.dst"] or "[%s]" % r["ipv6.dst"], r["tcp.dstport"])
        syn, ack = r["tcp.flags.syn"] in ("1", "True"), r["tcp.flags.ack"] in ("1", "True")
        fin, rst = r["tcp.flags.fin"] in ("1", "True"), r["tcp.flags.reset"] in ("1", "True")
        if syn and not ack:
            st["syn"] = True
            st["client"], st["server"] = src, dst
        elif syn and ack:
            st["synack"] = True
        if fin or rst:
            who = "client" if src == st["client"] else "server"
            st["closes"].append("%s %s" % (who, "RST" if rst else "FIN"))

    extra = []
    if is_tls:
        sport = next(iter(streams.values()))["server"].rsplit(":", 1)[1]
        extra += ["-d", "tcp.port==%s,tls" % sport]
        if os.path.exists(keylog):
            extra += ["-o", "tls.keylog_file:%s" % keylog]

    reqs = collections.defaultdict(list)
    for r in tshark(path, ["tcp.stream", "http.request.method", "http.request.uri",
                           "http.request.version"], "http.request", extra):
        reqs[int(r["tcp.stream"])].append("%s %s" % (r["http.request.method"],
                                                      r["http.request.uri"]))
    codes = collections.defaultdict(list)
    for r in tshark(path, ["tcp.stream", "http.response.code"], "http.response", extra):
        codes[int(r["tcp.stream"])].append(r["http.response.code"])

    tls = collections.defaultdict(dict)
    if is_tls:
        for r in tshark(path, ["tcp.stream", "tls.handshake.type",
                               "tls.handshake.version",
                               "tls.handshake.extensions.supported_version",
                               "tls.handshake.extension.type"],
                        "tls.handshake", extra):
            s = int(r["tcp.stream"])
            types = r["tls.handshake.type"].split(",")
            t = tls[s]
            t.setdefault("types", []).extend(types)
            if "1" in types:
                t["ch"] = t.get("ch", 0) + 1
                exts = r["tls.handshake.extension.type"].split(",")
                t["ch_psk"] = "41" in exts
            if "2" in types:
                sv = r["tls.handshake.extensions.supported_version"].split(",")
                hv = r["tls.handshake.version"].split(",")
                # In a ServerHello frame the only supported_versions value is the
                # server's choice (ClientHello is in another frame).
                t["version"] = tls_version_name(sv[0] if sv and sv[0] else hv[0])
                t["sh_psk"] = "41" in r["tls.handshake.extension.type"].split(",")

    close_notify = {}
    if is_tls:
        for r in tshark(path, ["tcp.stream", "ip.src", "ipv6.src", "tcp.srcport"],
                        "tls.alert_message.desc == 0", extra):
            s = int(r["tcp.stream"])
            src = "%s:%s" % (r["ip.src"] or "[%s]" % r["ipv6.src"], r["tcp.srcport"])
            close_notify.setdefault(s, "client" if src == streams[s]["client"] else "server")

    print("== %s" % os.path.basename(path))
    total_req = sum(len(v) for v in reqs.values())
    print("   tcp_connections=%d http_requests=%d" % (len(streams), total_req))
    for s, st in streams.items():
        line = "   stream %d: %s -> %s pkts=%d handshake=%s" % (
            s, st["client"], st["server"], st["packets"],
            "SYN,SYN-ACK" if st["syn"] and st["synack"] else "incomplete")
        line += " requests=%d" % len(reqs[s])
        if codes[s]:
            line += " status=%s" % ",".join(codes[s])
        if s in tls:
            t = tls[s]
            if t.get("version") == "TLS1.3":
                resumed = t.get("sh_psk", False)
            else:  # TLS1.2: abbreviated handshake has no server Certificate
                resumed = "2" in t.get("types", []) and "11" not in t.get("types", [])
            line += " tls=%s client_hellos=%d resumed=%s" % (
                t.get("version", "?"), t.get("ch", 0), "yes" if resumed else "no")
        if s in close_notify:
            line += " first_close_notify=%s" % close_notify[s]
        line += " close=[%s]" % ", ".join(st["closes"])
        print(line)
        for q in reqs[s]:
            print("      %s" % q)


def main():
    for p in sys.argv[1:]:
        facts(p)


if __name__ == "__main__":
    main()
