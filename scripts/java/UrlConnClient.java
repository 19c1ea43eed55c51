// HttpURLConnection / HttpsURLConnection client used by
// scripts/record-client-captures.sh.
//
//   java UrlConnClient URL N [THREADS]
//
// Each of THREADS threads (default 1) performs N sequential GETs of URL with
// HttpURLConnection — or, with -Dclient.body=BYTES, POSTs of a JSON body of
// BYTES bytes (setFixedLengthStreamingMode) — reads every response body
// fully (the error stream for 4xx and 5xx) and closes the input
// stream (which, with -Dhttp.keepAlive=true -- the JDK default -- returns the
// connection to the JDK keep-alive cache). Connection reuse is controlled by
// the standard system property -Dhttp.keepAlive=true|false. TLS trust comes
// from -Djavax.net.ssl.trustStore=... (no trust-all code). Connect and read
// timeouts are 10 s; the whole run is bounded by the caller's `timeout`.
// With -Dclient.expect=CODE a response with that status (say 429 from a
// rate-limited API) is not a failure. With -Dclient.retry429=immediate a
// request answered 429 is sent again at once, with
// -Dclient.retry429=honour after sleeping its Retry-After (delay-seconds,
// at most 5 s), at most 3 times — each time on a connection of its own
// when -Dhttp.keepAlive=false. With -Dclient.pause=MS each thread sleeps
// MS milliseconds between one request (its retries included) and the next,
// not before the first — long enough, an idle connection in the JDK
// keep-alive cache (kept 5 s unless the server's Keep-Alive header says
// otherwise) may be closed by the server meanwhile; without it, no pause.
// With -Dclient.leak=true (scripts/record-leak-captures.sh) each request
// only calls getResponseCode(): the response body is not read and the
// stream neither read nor closed, nor is disconnect() called, so the JDK
// never returns the connection to its keep-alive cache and the next
// request opens a new one while it sits open and idle (a leak: in
// record-leak-captures.sh's runs, where no GC ran, the leaked sockets were
// closed only by the JVM's exit); without it (the default), every body is
// read and closed as above.
import java.io.InputStream;
import java.io.OutputStream;
import java.net.HttpURLConnection;
import java.net.URL;

public class UrlConnClient {
    public static void main(String[] args) throws Exception {
        if (args.length < 2) {
            System.err.println("usage: UrlConnClient URL N [THREADS]");
            System.exit(2);
        }
        final URL url = new URL(args[0]);
        final int n = Integer.parseInt(args[1]);
        final int threads = args.length > 2 ? Integer.parseInt(args[2]) : 1;
        if (n < 1 || n > 1000 || threads < 1 || threads > 64) {
            throw new IllegalArgumentException("N must be 1..1000, THREADS 1..64");
        }
        final byte[] body = HttpClientPooled.requestBody();
        final int expected = Integer.getInteger("client.expect", 200);
        final String retry = System.getProperty("client.retry429");
        if (retry != null && !retry.equals("immediate") && !retry.equals("honour")) {
            throw new IllegalArgumentException("client.retry429 is immediate or honour");
        }
        HttpClientPooled.exit(HttpClientPooled.run(threads, n, expected, null, (tid, i) -> {
            int code = 0;
            for (int attempt = 0; attempt <= 3; attempt++) {
                HttpURLConnection c = once(url, body);
                code = c.getResponseCode();
                System.err.printf("thread %d req %d -> %d%n", tid, i + 1, code);
                if (code != 429 || retry == null || attempt == 3) break;
                String wait = c.getHeaderField("Retry-After");
                if (retry.equals("honour") && wait != null && wait.trim().matches("[0-9]{1,4}")) {
                    Thread.sleep(Math.min(5_000L, Long.parseLong(wait.trim()) * 1_000L));
                }
            }
            return code;
        }));
    }

    /**
     * One request, its response read in full and its stream closed; with
     * -Dclient.leak=true neither: only its status is read.
     */
    static HttpURLConnection once(URL url, byte[] body) throws java.io.IOException {
        HttpURLConnection c = (HttpURLConnection) url.openConnection();
        c.setConnectTimeout(10_000);
        c.setReadTimeout(10_000);
        if (body != null) {
            c.setRequestMethod("POST");
            c.setDoOutput(true);
            c.setRequestProperty("Content-Type", "application/json");
            c.setFixedLengthStreamingMode(body.length);
            try (OutputStream out = c.getOutputStream()) {
                out.write(body);
            }
        }
        int code = c.getResponseCode();
        if (Boolean.getBoolean("client.leak")) {
            System.err.println("  body not read, stream not closed (client.leak)");
            return c;
        }
        long len = 0;
        try (InputStream in = code < 400 ? c.getInputStream() : c.getErrorStream()) {
            if (in != null) {
                byte[] buf = new byte[8192];
                int r;
                while ((r = in.read(buf)) != -1) len += r;
            }
        }
        System.err.printf("  %d bytes%n", len);
        return c;
    }
}
