// The event-loop client under load, used by
// scripts/record-ratelimit-captures.sh: Netty 4.1 (Debian's libnetty-java),
// the engine under Reactor Netty and so Spring's WebClient, with its own
// TLS (SslHandler over the JDK's SSLEngine) — a reactive client whose
// records are written by Netty, not by the JDK's socket streams.
//
//   java NettyClient URL N INFLIGHT
//
// ONE event-loop thread does all the I/O; the main thread issues N
// requests without waiting for their answers, holding at most INFLIGHT
// outstanding, then waits for the last (60 s at most), as AsyncClient
// does (AsyncClient.drive). -Dclient.version=HTTP_2 (the default) offers
// only h2 by ALPN and multiplexes every request on one connection (a
// stream each, Http2MultiplexHandler; requests started before the
// connection is up wait for it); HTTP_1_1 offers only http/1.1 and keeps
// a pool of at most INFLIGHT connections (FixedChannelPool, as Reactor
// Netty's pool does), a connection going back to the pool when its answer
// is read (closed instead when the answer says `Connection: close`).
// Requests are GETs, or with -Dclient.body=BYTES POSTs of a JSON body of
// BYTES bytes (HttpClientPooled.requestBody), written as one message (head
// and body in one write). A status other than 200 and -Dclient.expect=CODE
// counts as a failure (exit status 1); a request that fails is printed and
// counted, and fails the run only with -Dclient.errors=false. TLS trust
// comes from -Djavax.net.ssl.trustStore=... (the default trust managers).
import java.net.URI;
import java.security.KeyStore;
import java.util.concurrent.TimeUnit;
import java.util.function.IntConsumer;

import javax.net.ssl.SSLParameters;
import javax.net.ssl.TrustManagerFactory;

import io.netty.bootstrap.Bootstrap;
import io.netty.buffer.Unpooled;
import io.netty.channel.Channel;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInitializer;
import io.netty.channel.ChannelOption;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.SimpleChannelInboundHandler;
import io.netty.channel.nio.NioEventLoopGroup;
import io.netty.channel.pool.AbstractChannelPoolHandler;
import io.netty.channel.pool.FixedChannelPool;
import io.netty.channel.socket.nio.NioSocketChannel;
import io.netty.handler.codec.http.DefaultFullHttpRequest;
import io.netty.handler.codec.http.FullHttpRequest;
import io.netty.handler.codec.http.FullHttpResponse;
import io.netty.handler.codec.http.HttpClientCodec;
import io.netty.handler.codec.http.HttpHeaderNames;
import io.netty.handler.codec.http.HttpMethod;
import io.netty.handler.codec.http.HttpObjectAggregator;
import io.netty.handler.codec.http.HttpUtil;
import io.netty.handler.codec.http.HttpVersion;
import io.netty.handler.codec.http2.Http2FrameCodecBuilder;
import io.netty.handler.codec.http2.Http2MultiplexHandler;
import io.netty.handler.codec.http2.Http2StreamChannel;
import io.netty.handler.codec.http2.Http2StreamChannelBootstrap;
import io.netty.handler.codec.http2.Http2StreamFrameToHttpObjectCodec;
import io.netty.handler.codec.http2.HttpConversionUtil;
import io.netty.handler.ssl.SslContext;
import io.netty.handler.ssl.SslContextBuilder;
import io.netty.handler.ssl.SslHandler;
import io.netty.handler.ssl.SslProvider;
import io.netty.util.AttributeKey;
import io.netty.util.concurrent.Promise;

public class NettyClient {
    /** The completion of the request a channel (or stream) carries. */
    static final AttributeKey<IntConsumer> DONE = AttributeKey.valueOf("done");

    /** Completes a channel's request with its answer's status, or -1 when it closes first. */
    static class Answer extends SimpleChannelInboundHandler<FullHttpResponse> {
        private final FixedChannelPool pool;   // null over HTTP/2

        Answer(FixedChannelPool pool) {
            this.pool = pool;
        }

        @Override
        protected void channelRead0(ChannelHandlerContext ctx, FullHttpResponse r) {
            final Channel ch = ctx.channel();
            final IntConsumer done = ch.attr(DONE).getAndSet(null);
            System.err.printf("req -> %d %s%n", r.status().code(), pool == null ? "HTTP/2" : r.protocolVersion());
            if (pool == null) {
                ch.close();   // the stream
            } else {
                if (!HttpUtil.isKeepAlive(r)) ch.close();
                pool.release(ch);
            }
            if (done != null) done.accept(r.status().code());
        }

        @Override
        public void channelInactive(ChannelHandlerContext ctx) {
            fail(ctx.channel(), "closed before its answer");
        }

        @Override
        public void exceptionCaught(ChannelHandlerContext ctx, Throwable e) {
            fail(ctx.channel(), e.toString());
            ctx.close();
        }

        private static void fail(Channel ch, String why) {
            final IntConsumer done = ch.attr(DONE).getAndSet(null);
            if (done != null) {
                System.err.println("req -> error " + why);
                done.accept(-1);
            }
        }
    }

    public static void main(String[] args) throws Exception {
        if (args.length < 3) {
            System.err.println("usage: NettyClient URL N INFLIGHT");
            System.exit(2);
        }
        final URI uri = URI.create(args[0]);
        final int n = Integer.parseInt(args[1]);
        final int inflight = Integer.parseInt(args[2]);
        if (n < 1 || n > 1000 || inflight < 1 || inflight > 100) {
            throw new IllegalArgumentException("N must be 1..1000, INFLIGHT 1..100");
        }
        final String host = uri.getHost();
        final int port = uri.getPort() < 0 ? 443 : uri.getPort();
        final boolean h2 = System.getProperty("client.version", "HTTP_2").equals("HTTP_2");
        final byte[] body = HttpClientPooled.requestBody();
        final int expected = Integer.getInteger("client.expect", 200);

        final TrustManagerFactory trust = TrustManagerFactory.getInstance(TrustManagerFactory.getDefaultAlgorithm());
        trust.init((KeyStore) null);   // javax.net.ssl.trustStore
        // Debian's Netty leaves ALPN out of its JDK provider: the offer is
        // set on each SSLEngine instead (Java 9+ speaks ALPN itself).
        final String alpn = h2 ? "h2" : "http/1.1";
        final SslContext tls = SslContextBuilder.forClient()
                .sslProvider(SslProvider.JDK)
                .trustManager(trust)
                .build();
        final EventLoopGroup loop = new NioEventLoopGroup(1);
        final Bootstrap boot = new Bootstrap().group(loop).channel(NioSocketChannel.class)
                .remoteAddress(host, port)
                .option(ChannelOption.CONNECT_TIMEOUT_MILLIS, 10_000);

        // Starts one request; calls `done` with its status, or -1 if it failed.
        final AsyncClient.Client start;
        if (h2) {
            final Promise<Channel> up = loop.next().newPromise();
            boot.handler(new ChannelInitializer<Channel>() {
                @Override
                protected void initChannel(Channel ch) {
                    final SslHandler ssl = offering(tls.newHandler(ch.alloc(), host, port), alpn);
                    ch.pipeline().addLast(ssl, Http2FrameCodecBuilder.forClient().build(),
                            new Http2MultiplexHandler(new SimpleChannelInboundHandler<Object>() {
                                @Override
                                protected void channelRead0(ChannelHandlerContext c, Object m) { }
                            }));
                    ssl.handshakeFuture().addListener(f -> {
                        final String chosen = ssl.engine().getApplicationProtocol();
                        if (!f.isSuccess()) {
                            up.tryFailure(f.cause());
                        } else if (!alpn.equals(chosen)) {
                            up.tryFailure(new IllegalStateException("ALPN chose " + chosen));
                            ch.close();
                        } else {
                            up.trySuccess(ch);
                        }
                    });
                }
            });
            boot.connect().addListener(f -> {
                if (!f.isSuccess()) up.tryFailure(f.cause());
            });
            start = done -> up.addListener(f -> {
                if (failed(f, done)) return;
                new Http2StreamChannelBootstrap(up.getNow())
                        .handler(new ChannelInitializer<Http2StreamChannel>() {
                            @Override
                            protected void initChannel(Http2StreamChannel ch) {
                                ch.pipeline().addLast(new Http2StreamFrameToHttpObjectCodec(false),
                                        new HttpObjectAggregator(1 << 20), new Answer(null));
                            }
                        })
                        .open().addListener(s -> {
                            if (failed(s, done)) return;
                            final Channel stream = (Channel) s.getNow();
                            stream.attr(DONE).set(done);
                            final FullHttpRequest req = request(uri, body);
                            req.headers().set(HttpConversionUtil.ExtensionHeaderNames.SCHEME.text(), "https");
                            stream.writeAndFlush(req);
                        });
            });
        } else {
            final FixedChannelPool[] pool = new FixedChannelPool[1];
            pool[0] = new FixedChannelPool(boot, new AbstractChannelPoolHandler() {
                @Override
                public void channelCreated(Channel ch) {
                    ch.pipeline().addLast(offering(tls.newHandler(ch.alloc(), host, port), alpn),
                            new HttpClientCodec(),
                            new HttpObjectAggregator(1 << 20), new Answer(pool[0]));
                }
            }, inflight);
            start = done -> pool[0].acquire().addListener(f -> {
                if (failed(f, done)) return;
                final Channel ch = (Channel) f.getNow();
                ch.attr(DONE).set(done);
                ch.writeAndFlush(request(uri, body));
            });
        }

        AsyncClient.drive(start, n, inflight, false, expected,
                () -> loop.shutdownGracefully(0, 2, TimeUnit.SECONDS).await(5, TimeUnit.SECONDS));
    }

    /** Whether `step` of a request failed; if so, the request is done (-1). */
    static boolean failed(io.netty.util.concurrent.Future<?> step, IntConsumer done) {
        if (step.isSuccess()) return false;
        System.err.println("req -> error " + step.cause());
        done.accept(-1);
        return true;
    }

    /** `ssl` offering one protocol by ALPN. */
    static SslHandler offering(SslHandler ssl, String protocol) {
        final SSLParameters params = ssl.engine().getSSLParameters();
        params.setApplicationProtocols(new String[] {protocol});
        ssl.engine().setSSLParameters(params);
        return ssl;
    }

    /** A GET, or a POST of `body` as JSON, head and body in one message. */
    static FullHttpRequest request(URI uri, byte[] body) {
        final String path = uri.getRawPath() + (uri.getRawQuery() == null ? "" : "?" + uri.getRawQuery());
        final FullHttpRequest req = body == null
                ? new DefaultFullHttpRequest(HttpVersion.HTTP_1_1, HttpMethod.GET, path)
                : new DefaultFullHttpRequest(HttpVersion.HTTP_1_1, HttpMethod.POST, path, Unpooled.wrappedBuffer(body));
        req.headers().set(HttpHeaderNames.HOST, uri.getAuthority());
        if (body != null) {
            req.headers().set(HttpHeaderNames.CONTENT_TYPE, "application/json");
            HttpUtil.setContentLength(req, body.length);
        }
        return req;
    }
}
