// pool_client: ONE net/http Client shared by -threads goroutines, each
// sending -requests sequential GETs of -url, for
// scripts/record-go-captures.sh. Its Transport is a clone of
// http.DefaultTransport with only the TLS config set (InsecureSkipVerify,
// the key log, optionally the SNI) and HTTP/2 off, so that the one thing
// that limits connection reuse is MaxIdleConnsPerHost: left at its
// default (http.DefaultMaxIdleConnsPerHost, 2) with -idle 0, else set to
// -idle.
//
// How net/http (Go 1.19) uses it: a request that finds no idle connection
// waits for one AND starts a dial; whichever comes first serves it (a
// connection another request hands back, or its own dial). A dial no
// longer needed goes on; its connection is then handed to a waiting
// request, or put in the idle pool, or, if the pool already holds
// MaxIdleConnsPerHost connections, closed right after its TLS handshake.
// A connection whose response has been read is handed to a waiting
// request, or put in the pool, or, the pool being full, closed right
// after that response.
//
// The goroutines start together (a barrier), read each response body to
// its end and close it, so every connection is reusable. After the last
// response the client waits -settle (so that dials still going on end as
// they would in a long-lived program, not cut by the exit), closes its
// idle connections (so their FINs are on the wire before it exits) and
// prints one line: requests done, errors, status counts. The client has
// no Timeout unless -timeout is given (with one, net/http cancels the
// request's context once its body is closed, which also aborts a dial the
// request started but did not need); bound the run from outside
// (timeout(1)).
//
// Standard library only (Go 1.19). Usage:
//
//	pool_client -url https://127.0.0.1:18497/index.html -servername localhost \
//	    -threads 10 -requests 10 -idle 0 -settle 1s -keylog FILE
package main

import (
	"crypto/tls"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"sort"
	"strings"
	"sync"
	"time"
)

func main() {
	url := flag.String("url", "", "URL to GET (required)")
	threads := flag.Int("threads", 10, "goroutines sharing the one client")
	requests := flag.Int("requests", 10, "sequential GETs per goroutine")
	idle := flag.Int("idle", 0, "MaxIdleConnsPerHost (0: leave Go's default, 2)")
	keylog := flag.String("keylog", "", "write the TLS key log (NSS format) to this file")
	serverName := flag.String("servername", "", "TLS server name (SNI) if not the URL's host")
	settle := flag.Duration("settle", 0, "wait this long after the last response before closing idle connections and exiting")
	timeout := flag.Duration("timeout", 0, "http.Client.Timeout (0: none, like the default client)")
	flag.Parse()
	if *url == "" || *threads < 1 || *requests < 1 || *idle < 0 {
		flag.Usage()
		os.Exit(2)
	}

	tlsConfig := &tls.Config{InsecureSkipVerify: true, ServerName: *serverName}
	if *keylog != "" {
		f, err := os.OpenFile(*keylog, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
		if err != nil {
			fmt.Fprintln(os.Stderr, "error:", err)
			os.Exit(1)
		}
		defer f.Close()
		tlsConfig.KeyLogWriter = f
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = tlsConfig
	tr.ForceAttemptHTTP2 = false
	// A non-nil empty map: no HTTP/2 even if the server offered it by ALPN.
	tr.TLSNextProto = map[string]func(string, *tls.Conn) http.RoundTripper{}
	if *idle > 0 {
		tr.MaxIdleConnsPerHost = *idle
	}
	client := &http.Client{Transport: tr, Timeout: *timeout}

	var (
		mu       sync.Mutex
		done     int
		errs     int
		statuses = map[string]int{}
	)
	start := make(chan struct{})
	var ready, finished sync.WaitGroup
	for t := 0; t < *threads; t++ {
		ready.Add(1)
		finished.Add(1)
		go func(t int) {
			defer finished.Done()
			ready.Done()
			<-start // the barrier: every goroutine begins at once
			for i := 0; i < *requests; i++ {
				status, err := get(client, *url)
				mu.Lock()
				done++
				if err != nil {
					errs++
					fmt.Fprintf(os.Stderr, "goroutine %d request %d: %v\n", t, i+1, err)
				} else {
					statuses[status]++
				}
				mu.Unlock()
			}
		}(t)
	}
	ready.Wait()
	close(start)
	finished.Wait()
	// Dials that net/http started for requests which then got another
	// connection go on in the background; let them end (into the idle pool,
	// or closed if it is full) as they would in a long-lived program.
	time.Sleep(*settle)
	client.CloseIdleConnections()

	keys := make([]string, 0, len(statuses))
	for k := range statuses {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s:%d", k, statuses[k]))
	}
	fmt.Printf("requests=%d errors=%d status=%s threads=%d requests_per_thread=%d max_idle_conns_per_host=%d settle=%s\n",
		done, errs, strings.Join(parts, ","), *threads, *requests, maxIdle(tr), *settle)
	if errs > 0 {
		os.Exit(1)
	}
}

// get sends one GET, reads the body to its end and closes it; it returns
// the status code.
func get(client *http.Client, url string) (string, error) {
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	resp, err := client.Do(req)
	if err != nil {
		return "", err
	}
	_, err = io.Copy(io.Discard, resp.Body)
	if cerr := resp.Body.Close(); err == nil {
		err = cerr
	}
	return fmt.Sprint(resp.StatusCode), err
}

// maxIdle is the per-host idle limit tr applies (0 means the default).
func maxIdle(tr *http.Transport) int {
	if tr.MaxIdleConnsPerHost > 0 {
		return tr.MaxIdleConnsPerHost
	}
	return http.DefaultMaxIdleConnsPerHost
}
