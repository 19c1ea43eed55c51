// The non-blocking ("reactive") clients, used by
// scripts/record-ratelimit-captures.sh: java.net.http.HttpClient's
// sendAsync, Apache HttpAsyncClient 5 (Debian's libhttpclient5-java with
// httpcore5-h2) and OkHttp 3's enqueue (libokhttp-java) — the other side
// of the brief's "a blocking client against a reactive one under load".
//
//   java AsyncClient jdk|apache|okhttp URL N INFLIGHT
//
// ONE thread issues N requests without waiting for their answers, holding
// at most INFLIGHT outstanding (a semaphore released by each completion
// callback), then waits for the last (60 s at most); with
// -Dclient.warmup=true the first request is answered before the others
// start (the connection warmed). Requests are GETs, or
// with -Dclient.body=BYTES POSTs of a JSON body of BYTES bytes
// (HttpClientPooled.requestBody); each response body is read in full.
// -Dclient.version=HTTP_2 (the default) or HTTP_1_1 picks the protocol:
// jdk's HttpClient multiplexes HTTP/2 (having opened a connection for each
// request sent before its first HTTP/2 connection was up) and opens a
// connection per outstanding request over HTTP/1.1 (its pool is unbounded);
// apache uses H2AsyncClientBuilder (HTTP/2 only, multiplexed, one
// connection per route) or, over HTTP/1.1, a pool of at most INFLIGHT
// connections; okhttp offers h2 by ALPN (or only HTTP/1.1) and its
// dispatcher, as configured by default, runs at most 5 calls to one host
// at once (the others wait in its queue). A status other than 200 and
// -Dclient.expect=CODE counts as a failure (exit status 1); a request that
// fails is printed and counted, and fails the run only with
// -Dclient.errors=false (as in PooledLibClient). TLS trust comes from
// -Djavax.net.ssl.trustStore=... (the default SSLContext); timeouts 10 s.
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.IntConsumer;

import javax.net.ssl.SSLContext;

import okhttp3.Call;
import okhttp3.Callback;
import okhttp3.OkHttpClient;
import okhttp3.Response;

import org.apache.hc.client5.http.async.methods.SimpleHttpResponse;
import org.apache.hc.client5.http.async.methods.SimpleRequestBuilder;
import org.apache.hc.client5.http.config.ConnectionConfig;
import org.apache.hc.client5.http.config.RequestConfig;
import org.apache.hc.client5.http.config.TlsConfig;
import org.apache.hc.client5.http.impl.async.CloseableHttpAsyncClient;
import org.apache.hc.client5.http.impl.async.HttpAsyncClients;
import org.apache.hc.client5.http.impl.nio.PoolingAsyncClientConnectionManager;
import org.apache.hc.client5.http.impl.nio.PoolingAsyncClientConnectionManagerBuilder;
import org.apache.hc.client5.http.ssl.ClientTlsStrategyBuilder;
import org.apache.hc.core5.concurrent.FutureCallback;
import org.apache.hc.core5.http.ContentType;
import org.apache.hc.core5.http.nio.ssl.TlsStrategy;
import org.apache.hc.core5.http2.HttpVersionPolicy;
import org.apache.hc.core5.util.Timeout;

public class AsyncClient {
    /** Starts one request; calls `done` with its status, or -1 if it failed. */
    interface Client {
        void start(IntConsumer done);
    }

    public static void main(String[] args) throws Exception {
        if (args.length < 4) {
            System.err.println("usage: AsyncClient jdk|apache|okhttp URL N INFLIGHT");
            System.exit(2);
        }
        final URI uri = URI.create(args[1]);
        final int n = Integer.parseInt(args[2]);
        final int inflight = Integer.parseInt(args[3]);
        if (n < 1 || n > 1000 || inflight < 1 || inflight > 100) {
            throw new IllegalArgumentException("N must be 1..1000, INFLIGHT 1..100");
        }
        final boolean h2 = System.getProperty("client.version", "HTTP_2").equals("HTTP_2");
        final byte[] body = HttpClientPooled.requestBody();
        final int expected = Integer.getInteger("client.expect", 200);
        final Client client;
        final AutoCloseable closer;
        switch (args[0]) {
            case "jdk": {
                final HttpClient jdk = HttpClient.newBuilder()
                        .version(h2 ? HttpClient.Version.HTTP_2 : HttpClient.Version.HTTP_1_1)
                        .connectTimeout(Duration.ofSeconds(10))
                        .build();
                client = done -> {
                    HttpRequest.Builder b = HttpRequest.newBuilder(uri).timeout(Duration.ofSeconds(10));
                    HttpRequest req = body == null ? b.GET().build()
                            : b.header("Content-Type", "application/json")
                                    .POST(HttpRequest.BodyPublishers.ofByteArray(body))
                                    .build();
                    jdk.sendAsync(req, HttpResponse.BodyHandlers.ofByteArray()).whenComplete((r, e) -> {
                        if (e != null) System.err.println("req -> error " + e);
                        else System.err.printf("req -> %d %s%n", r.statusCode(), r.version());
                        done.accept(e != null ? -1 : r.statusCode());
                    });
                };
                closer = () -> { };   // Java 17's HttpClient has no close()
                break;
            }
            case "apache": {
                final TlsStrategy tls = ClientTlsStrategyBuilder.create()
                        .setSslContext(SSLContext.getDefault())
                        .build();
                final RequestConfig config = RequestConfig.custom()
                        .setResponseTimeout(Timeout.ofSeconds(10))
                        .build();
                final ConnectionConfig connect = ConnectionConfig.custom()
                        .setConnectTimeout(Timeout.ofSeconds(10))
                        .build();
                final CloseableHttpAsyncClient ap;
                if (h2) {
                    ap = HttpAsyncClients.customHttp2()
                            .setTlsStrategy(tls)
                            .setDefaultConnectionConfig(connect)
                            .setDefaultRequestConfig(config)
                            .build();
                } else {
                    final PoolingAsyncClientConnectionManager pool =
                            PoolingAsyncClientConnectionManagerBuilder.create()
                                    .setTlsStrategy(tls)
                                    .setDefaultConnectionConfig(connect)
                                    .setDefaultTlsConfig(TlsConfig.custom()
                                            .setVersionPolicy(HttpVersionPolicy.FORCE_HTTP_1)
                                            .build())
                                    .setMaxConnTotal(inflight)
                                    .setMaxConnPerRoute(inflight)
                                    .build();
                    ap = HttpAsyncClients.custom()
                            .setConnectionManager(pool)
                            .setDefaultRequestConfig(config)
                            .build();
                }
                ap.start();
                client = done -> {
                    SimpleRequestBuilder b = body == null ? SimpleRequestBuilder.get(uri)
                            : SimpleRequestBuilder.post(uri).setBody(body, ContentType.APPLICATION_JSON);
                    ap.execute(b.build(), new FutureCallback<SimpleHttpResponse>() {
                        public void completed(SimpleHttpResponse r) {
                            System.err.printf("req -> %d %s%n", r.getCode(), r.getVersion());
                            done.accept(r.getCode());
                        }

                        public void failed(Exception e) {
                            System.err.println("req -> error " + e);
                            done.accept(-1);
                        }

                        public void cancelled() {
                            System.err.println("req -> cancelled");
                            done.accept(-1);
                        }
                    });
                };
                closer = ap;
                break;
            }
            case "okhttp": {
                final OkHttpClient ok = PooledLibClient.okHttp(h2);
                client = done -> {
                    ok.newCall(PooledLibClient.okRequest(uri.toString(), body)).enqueue(new Callback() {
                        public void onResponse(Call call, Response r) {
                            try (r) {
                                r.body().bytes();
                                System.err.printf("req -> %d %s%n", r.code(), r.protocol());
                                done.accept(r.code());
                            } catch (java.io.IOException e) {
                                onFailure(call, e);
                            }
                        }

                        public void onFailure(Call call, java.io.IOException e) {
                            System.err.println("req -> error " + e);
                            done.accept(-1);
                        }
                    });
                };
                closer = () -> PooledLibClient.close(ok);
                break;
            }
            default:
                throw new IllegalArgumentException("client must be jdk, apache or okhttp");
        }
        drive(client, n, inflight, Boolean.getBoolean("client.warmup"), expected, closer);
    }

    /**
     * Issues `n` requests through `client` from this thread, at most
     * `inflight` outstanding (with `warmup`, the first answered before the
     * others start), waits for the last (60 s at most), closes `closer` and
     * exits: 1 on a status other than 200 and `expected`, or on a failed
     * request with -Dclient.errors=false. Shared with NettyClient.
     */
    static void drive(Client client, int n, int inflight, boolean warmup, int expected,
            AutoCloseable closer) throws Exception {
        final Semaphore slots = new Semaphore(inflight);
        final CountDownLatch finished = new CountDownLatch(n);
        final AtomicInteger failures = new AtomicInteger();
        final AtomicInteger errors = new AtomicInteger();
        for (int i = 0; i < n; i++) {
            if (!slots.tryAcquire(30, TimeUnit.SECONDS)) {
                System.err.println("no request finished in 30 s");
                System.exit(1);
            }
            client.start(code -> {
                if (code < 0) errors.incrementAndGet();
                else if (code != 200 && code != expected) failures.incrementAndGet();
                slots.release();
                finished.countDown();
            });
            // -Dclient.warmup=true: the first request alone, answered
            // before the others start (its connection is then up).
            if (i == 0 && warmup && slots.tryAcquire(inflight, 30, TimeUnit.SECONDS)) {
                slots.release(inflight);
            }
        }
        if (!finished.await(60, TimeUnit.SECONDS)) {
            System.err.println("requests still outstanding after 60 s: " + finished.getCount());
            failures.incrementAndGet();
        }
        closer.close();
        System.err.println("errors: " + errors.get());
        final boolean errorsAllowed = Boolean.parseBoolean(System.getProperty("client.errors", "true"));
        HttpClientPooled.exit(failures.get() + (errorsAllowed ? 0 : errors.get()));
    }
}
