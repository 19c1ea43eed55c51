// java.net.http.HttpClient client used by scripts/record-client-captures.sh.
//
//   java HttpClientPooled URL N [THREADS]
//
// ONE HttpClient (forced to HTTP/1.1 with .version(HttpClient.Version.HTTP_1_1),
// or, with -Dclient.version=HTTP_2, left to negotiate HTTP/2 by ALPN as it
// does by default) is shared by THREADS threads (default 1); each thread performs N
// sequential blocking GETs of URL — or, with -Dclient.body=BYTES, POSTs of a
// JSON body of BYTES bytes — and reads each response body fully (BodyHandlers
// .ofByteArray()). With -Dclient.expect=CODE a response with that status
// (say 429 from a rate-limited API) is not a failure (UrlConnClient takes
// the same two properties). With -Dclient.pause=MS each thread sleeps MS
// milliseconds between one request and the next (as UrlConnClient and
// PooledLibClient, which share run()); without it, none. The client's
// built-in connection pool decides
// how many TCP connections are used. TLS trust comes from -Djavax.net.ssl.trustStore=...
// (the default SSLContext). Connect timeout and per-request timeout are 10 s.
// Java 17's HttpClient has no close(): pooled connections stay open until the
// JVM exits.
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.atomic.AtomicInteger;

public class HttpClientPooled {
    public static void main(String[] args) throws Exception {
        if (args.length < 2) {
            System.err.println("usage: HttpClientPooled URL N [THREADS]");
            System.exit(2);
        }
        final URI uri = URI.create(args[0]);
        final int n = Integer.parseInt(args[1]);
        final int threads = args.length > 2 ? Integer.parseInt(args[2]) : 1;
        if (n < 1 || n > 1000 || threads < 1 || threads > 64) {
            throw new IllegalArgumentException("N must be 1..1000, THREADS 1..64");
        }
        final HttpClient.Version version =
                HttpClient.Version.valueOf(System.getProperty("client.version", "HTTP_1_1"));
        final byte[] body = requestBody();
        final int expected = Integer.getInteger("client.expect", 200);
        final HttpClient client = HttpClient.newBuilder()
                .version(version)
                .connectTimeout(Duration.ofSeconds(10))
                .build();
        exit(run(threads, n, expected, null, (tid, i) -> {
            HttpRequest.Builder b = HttpRequest.newBuilder(uri).timeout(Duration.ofSeconds(10));
            HttpRequest req = body == null ? b.GET().build()
                    : b.header("Content-Type", "application/json")
                            .POST(HttpRequest.BodyPublishers.ofByteArray(body))
                            .build();
            HttpResponse<byte[]> resp = client.send(req, HttpResponse.BodyHandlers.ofByteArray());
            System.err.printf("thread %d req %d -> %d %s (%d bytes)%n", tid, i + 1,
                    resp.statusCode(), resp.version(), resp.body().length);
            return resp.statusCode();
        }));
    }

    /** The `i`th request of thread `tid`: its status. */
    interface Call {
        int request(int tid, int i) throws Exception;
    }

    /**
     * THREADS threads, started at once, each making N calls in sequence; a
     * status other than 200 and `expected` is a failure. An exception ends
     * its thread as one failure — unless `errors` is given, where an
     * IOException is counted there and the thread goes on. With
     * -Dclient.pause=MS each thread sleeps MS milliseconds between one call
     * and the next (not before the first); without it, not at all. Returns
     * the failures. (All three clients in scripts/java run their threads so.)
     */
    static int run(int threads, int n, int expected, AtomicInteger errors, Call call)
            throws InterruptedException {
        final long pause = Long.getLong("client.pause", 0L);
        if (pause < 0 || pause > 60_000) {
            throw new IllegalArgumentException("client.pause must be 0..60000 (ms)");
        }
        final AtomicInteger failures = new AtomicInteger();
        final CountDownLatch start = new CountDownLatch(1);
        List<Thread> ts = new ArrayList<>();
        for (int t = 0; t < threads; t++) {
            final int tid = t;
            Thread th = new Thread(() -> {
                try {
                    start.await();
                    for (int i = 0; i < n; i++) {
                        if (i > 0 && pause > 0) Thread.sleep(pause);
                        try {
                            int code = call.request(tid, i);
                            if (code != 200 && code != expected) failures.incrementAndGet();
                        } catch (java.io.IOException e) {
                            if (errors == null) throw e;
                            errors.incrementAndGet();
                            System.err.println("req -> error " + e);
                        }
                    }
                } catch (Exception e) {
                    failures.incrementAndGet();
                    e.printStackTrace();
                }
            }, "client-" + t);
            ts.add(th);
            th.start();
        }
        start.countDown();
        for (Thread th : ts) th.join(120_000);
        return failures.get();
    }

    /** Ends the run: status 1 after failures. */
    static void exit(int failures) {
        if (failures != 0) {
            System.err.println("failures: " + failures);
            System.exit(1);
        }
        System.exit(0);   // do not wait for JDK-internal (keep-alive/pool) threads
    }

    /** The body -Dclient.body=BYTES asks for, or null (GETs). */
    static byte[] requestBody() {
        final int bytes = Integer.getInteger("client.body", -1);
        if (bytes > 1_000_000) {
            throw new IllegalArgumentException("client.body must be at most 1000000");
        }
        return bytes < 0 ? null : jsonBody(bytes);
    }

    /** A JSON object of exactly `n` bytes (at least 12): {"pad":"xxx…"}. */
    static byte[] jsonBody(int n) {
        StringBuilder sb = new StringBuilder("{\"pad\":\"");
        while (sb.length() < n - 2) sb.append('x');
        return sb.append("\"}").toString().getBytes(java.nio.charset.StandardCharsets.US_ASCII);
    }
}
