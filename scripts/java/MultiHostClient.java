// java.net.http.HttpClient client used by scripts/record-host-captures.sh.
//
//   java MultiHostClient URL...
//
// ONE HttpClient, forced to HTTP/1.1 (.version(HttpClient.Version.HTTP_1_1)),
// performs one blocking GET of each URL, in the order given, one after the
// other, and reads each response body fully (BodyHandlers.ofByteArray()).
// The URLs may name different hosts (virtual hosts of one server, say
// http://a.test:PORT/ and http://b.test:PORT/, resolved to one address with
// -Djdk.net.hosts.file=FILE): the client's built-in connection pool decides
// which connection each request goes on. Each response is printed to stderr
// (its URL, status, version and size); a status other than 200 is a
// failure (exit status 1). Connect timeout and per-request timeout are 10 s;
// at most 100 URLs. Java 17's HttpClient has no close(): pooled connections
// stay open until the JVM exits (System.exit at the end).
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;

public class MultiHostClient {
    public static void main(String[] args) throws Exception {
        if (args.length < 1 || args.length > 100) {
            System.err.println("usage: MultiHostClient URL... (1..100 URLs)");
            System.exit(2);
        }
        final HttpClient client = HttpClient.newBuilder()
                .version(HttpClient.Version.HTTP_1_1)
                .connectTimeout(Duration.ofSeconds(10))
                .build();
        int failures = 0;
        for (int i = 0; i < args.length; i++) {
            final URI uri = URI.create(args[i]);
            HttpRequest req = HttpRequest.newBuilder(uri)
                    .timeout(Duration.ofSeconds(10))
                    .GET()
                    .build();
            HttpResponse<byte[]> resp = client.send(req, HttpResponse.BodyHandlers.ofByteArray());
            System.err.printf("req %d %s -> %d %s (%d bytes)%n", i + 1, uri,
                    resp.statusCode(), resp.version(), resp.body().length);
            if (resp.statusCode() != 200) failures++;
        }
        if (failures != 0) {
            System.err.println("failures: " + failures);
            System.exit(1);
        }
        System.exit(0);   // do not wait for JDK-internal (keep-alive/pool) threads
    }
}
