// The pooled third-party clients the brief names, used by
// scripts/record-ratelimit-captures.sh: OkHttp 3 and Apache HttpClient 5
// (classic API), from Debian's libokhttp-java and libhttpclient5-java.
//
//   java PooledLibClient okhttp|apache URL N [THREADS]
//
// ONE client (OkHttp's, with its default connection pool, HTTP/2 by ALPN
// when the server offers it; or Apache's, with a PoolingHttpClient-
// ConnectionManager of at most THREADS connections to the route, HTTP/1.1)
// is shared by THREADS threads (default 1); each performs N sequential
// requests: GETs, or with -Dclient.body=BYTES POSTs of a JSON body of BYTES
// bytes (HttpClientPooled.requestBody), reading each response body fully.
// A status other than 200 and -Dclient.expect=CODE is a failure. An
// exception from a request is printed and counted, and the thread goes on
// (OkHttp 3.13 throws StreamResetException reading a 429 that nginx
// follows with RST_STREAM NO_ERROR): the run fails only when -Dclient.errors
// is false. With -Dclient.pause=MS each thread sleeps MS milliseconds
// between one request and the next (HttpClientPooled.run). TLS trust comes
// from -Djavax.net.ssl.trustStore=... (the default SSLContext); timeouts
// are 10 s.
// With -Dclient.leak=true (scripts/record-leak-captures.sh) each request
// leaks its response: OkHttp's synchronous call reads only the status and
// never closes the Response nor its body, so its connection stays
// allocated to the call and the next call opens a new one; Apache's
// execute(request) likewise reads only the status and never closes the
// CloseableHttpResponse nor consumes its entity, so its connection stays
// leased — there the pool keeps its own defaults (5 connections per route,
// 25 in all) instead of THREADS, and a request waits at most 2 s for a
// connection (RequestConfig connectionRequestTimeout) before it fails.
// Without it (the default), every response is read in full and closed.
import java.net.URI;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

import okhttp3.MediaType;
import okhttp3.OkHttpClient;
import okhttp3.Protocol;
import okhttp3.Request;
import okhttp3.RequestBody;
import okhttp3.Response;
import org.apache.hc.client5.http.classic.methods.HttpGet;
import org.apache.hc.client5.http.classic.methods.HttpPost;
import org.apache.hc.client5.http.classic.methods.HttpUriRequestBase;
import org.apache.hc.client5.http.config.RequestConfig;
import org.apache.hc.client5.http.impl.classic.CloseableHttpClient;
import org.apache.hc.client5.http.impl.classic.CloseableHttpResponse;
import org.apache.hc.client5.http.impl.classic.HttpClientBuilder;
import org.apache.hc.client5.http.impl.classic.HttpClients;
import org.apache.hc.client5.http.impl.io.PoolingHttpClientConnectionManager;
import org.apache.hc.core5.http.ContentType;
import org.apache.hc.core5.http.io.entity.ByteArrayEntity;
import org.apache.hc.core5.http.io.entity.EntityUtils;
import org.apache.hc.core5.util.Timeout;

public class PooledLibClient {
    /** One request; its status. */
    interface Client {
        int request() throws Exception;
    }

    /**
     * An OkHttpClient with 10 s timeouts, offering HTTP/2 by ALPN (its
     * default), or only HTTP/1.1 (also AsyncClient's).
     */
    static OkHttpClient okHttp(boolean http2) {
        return new OkHttpClient.Builder()
                .protocols(http2 ? List.of(Protocol.HTTP_2, Protocol.HTTP_1_1) : List.of(Protocol.HTTP_1_1))
                .connectTimeout(10, TimeUnit.SECONDS)
                .readTimeout(10, TimeUnit.SECONDS)
                .build();
    }

    /** A GET of `url`, or with a `body` a POST of it as JSON. */
    static Request okRequest(String url, byte[] body) {
        Request.Builder b = new Request.Builder().url(url);
        if (body != null) b.post(RequestBody.create(MediaType.get("application/json"), body));
        return b.build();
    }

    /** Stops `ok`'s dispatcher and empties its connection pool. */
    static void close(OkHttpClient ok) {
        ok.dispatcher().executorService().shutdown();
        ok.connectionPool().evictAll();
    }

    /**
     * -Dclient.leak=true: `req` sent by `ap`, its response's status read and
     * the response left open (the connection stays leased).
     */
    @SuppressWarnings("deprecation")   // execute(request) without a handler
    static int leakApache(CloseableHttpClient ap, HttpUriRequestBase req) throws Exception {
        CloseableHttpResponse r = ap.execute(req);
        System.err.printf("req -> %d %s (entity not consumed, response not closed: client.leak)%n",
                r.getCode(), r.getVersion());
        return r.getCode();
    }

    public static void main(String[] args) throws Exception {
        if (args.length < 3) {
            System.err.println("usage: PooledLibClient okhttp|apache URL N [THREADS]");
            System.exit(2);
        }
        final String url = args[1];
        final int n = Integer.parseInt(args[2]);
        final int threads = args.length > 3 ? Integer.parseInt(args[3]) : 1;
        if (n < 1 || n > 1000 || threads < 1 || threads > 64) {
            throw new IllegalArgumentException("N must be 1..1000, THREADS 1..64");
        }
        final byte[] body = HttpClientPooled.requestBody();
        final int expected = Integer.getInteger("client.expect", 200);
        final boolean leak = Boolean.getBoolean("client.leak");
        final Client client;
        final AutoCloseable closer;
        switch (args[0]) {
            case "okhttp": {
                final OkHttpClient ok = okHttp(true);
                client = leak ? () -> {
                    Response r = ok.newCall(okRequest(url, body)).execute();
                    System.err.printf("req -> %d %s (body not read, response not closed: client.leak)%n",
                            r.code(), r.protocol());
                    return r.code();
                } : () -> {
                    try (Response r = ok.newCall(okRequest(url, body)).execute()) {
                        r.body().bytes();
                        System.err.printf("req -> %d %s%n", r.code(), r.protocol());
                        return r.code();
                    }
                };
                closer = () -> close(ok);
                break;
            }
            case "apache": {
                final PoolingHttpClientConnectionManager pool = new PoolingHttpClientConnectionManager();
                if (!leak) {
                    pool.setMaxTotal(threads);
                    pool.setDefaultMaxPerRoute(threads);
                }
                final HttpClientBuilder builder = HttpClients.custom()
                        .setConnectionManager(pool)
                        .useSystemProperties();
                if (leak) {
                    builder.setDefaultRequestConfig(RequestConfig.custom()
                            .setConnectionRequestTimeout(Timeout.ofSeconds(2))
                            .build());
                }
                final CloseableHttpClient ap = builder.build();
                client = () -> {
                    HttpUriRequestBase req = body == null ? new HttpGet(URI.create(url)) : new HttpPost(URI.create(url));
                    if (body != null) req.setEntity(new ByteArrayEntity(body, ContentType.APPLICATION_JSON));
                    if (leak) return leakApache(ap, req);
                    return ap.execute(req, r -> {
                        EntityUtils.consume(r.getEntity());
                        System.err.printf("req -> %d %s%n", r.getCode(), r.getVersion());
                        return r.getCode();
                    });
                };
                closer = ap;
                break;
            }
            default:
                throw new IllegalArgumentException("client must be okhttp or apache");
        }
        final AtomicInteger errors = new AtomicInteger();
        final boolean errorsAllowed = Boolean.parseBoolean(System.getProperty("client.errors", "true"));
        int failures = HttpClientPooled.run(threads, n, expected, errors, (tid, i) -> client.request());
        closer.close();
        System.err.println("errors: " + errors.get());
        HttpClientPooled.exit(failures + (errorsAllowed ? 0 : errors.get()));
    }
}
