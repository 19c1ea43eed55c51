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
// rate-limited API) is not a failure.
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
        HttpClientPooled.exit(HttpClientPooled.run(threads, n, expected, null, (tid, i) -> {
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
            long len = 0;
            try (InputStream in = code < 400 ? c.getInputStream() : c.getErrorStream()) {
                if (in != null) {
                    byte[] buf = new byte[8192];
                    int r;
                    while ((r = in.read(buf)) != -1) len += r;
                }
            }
            System.err.printf("thread %d req %d -> %d (%d bytes)%n", tid, i + 1, code, len);
            return code;
        }));
    }
}
