package web_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ardx-dev/ardx/web"
)

func TestForbiddenAddr(t *testing.T) {
	tests := []struct {
		ip        string
		forbidden bool
	}{
		{"127.0.0.1", true},
		{"127.255.255.254", true},
		{"10.1.2.3", true},
		{"172.16.0.1", true},
		{"172.31.255.255", true},
		{"192.168.1.1", true},
		{"169.254.1.1", true},
		{"169.254.169.254", true},
		{"100.64.0.1", true},
		{"100.100.100.200", true},
		{"0.0.0.0", true},
		{"0.1.2.3", true},
		{"255.255.255.255", true},
		{"240.0.0.1", true},
		{"224.0.0.1", true},
		{"239.255.255.250", true},
		{"192.0.0.8", true},
		{"192.0.2.10", true},
		{"198.51.100.7", true},
		{"203.0.113.9", true},
		{"198.18.0.1", true},
		{"192.88.99.1", true},
		{"::", true},
		{"::1", true},
		{"fe80::1", true},
		{"fe80::1%eth0", true},
		{"fc00::1", true},
		{"fd12:3456::1", true},
		{"fd00:ec2::254", true},
		{"ff02::1", true},
		{"::ffff:127.0.0.1", true},
		{"::ffff:10.0.0.1", true},
		{"::ffff:169.254.169.254", true},
		{"::127.0.0.1", true},      // IPv4-compatible, deprecated
		{"64:ff9b::a00:1", true},   // NAT64 of 10.0.0.1
		{"2002:c0a8:101::1", true}, // 6to4 of 192.168.1.1
		{"2001:db8::1", true},
		{"2001::1", true}, // Teredo
		{"3fff::1", true},
		{"100::1", true},  // discard-only
		{"fec0::1", true}, // deprecated site-local
		// Public addresses pass.
		{"1.1.1.1", false},
		{"8.8.8.8", false},
		{"172.32.0.1", false},
		{"100.128.0.1", false},
		{"192.169.0.1", false},
		{"::ffff:8.8.8.8", false},
		{"2606:4700:4700::1111", false},
		{"2a00:1450:4001:80b::200e", false},
		{"64:ff9b::808:808", false}, // NAT64 of 8.8.8.8
		{"2002:808:808::1", false},  // 6to4 of 8.8.8.8
	}
	for _, tc := range tests {
		t.Run(tc.ip, func(t *testing.T) {
			reason := web.ForbiddenAddr(netip.MustParseAddr(tc.ip))
			if got := reason != ""; got != tc.forbidden {
				t.Fatalf("ForbiddenAddr(%s) = %q, want forbidden=%v", tc.ip, reason, tc.forbidden)
			}
		})
	}
}

// TestFetchRefusesForbiddenTargets fetches literal addresses and names that
// resolve inside the network; none may connect, so nothing listens.
func TestFetchRefusesForbiddenTargets(t *testing.T) {
	lookup := func(_ context.Context, host string) ([]netip.Addr, error) {
		switch host {
		case "internal.example":
			return []netip.Addr{netip.MustParseAddr("10.0.0.5")}, nil
		case "mixed.example":
			return []netip.Addr{netip.MustParseAddr("93.184.216.34"), netip.MustParseAddr("192.168.0.10")}, nil
		case "metadata.example":
			return []netip.Addr{netip.MustParseAddr("169.254.169.254")}, nil
		case "mapped.example":
			return []netip.Addr{netip.MustParseAddr("::ffff:127.0.0.1")}, nil
		case "localhost":
			return []netip.Addr{netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("::1")}, nil
		}
		return nil, fmt.Errorf("no such host %s", host)
	}
	f := web.NewFetcher(web.FetchOptions{LookupNetIP: lookup, Timeout: 2 * time.Second})
	urls := []string{
		"http://127.0.0.1/",
		"http://127.0.0.1:8080/x",
		"https://[::1]/",
		"http://[::ffff:127.0.0.1]/",
		"http://169.254.169.254/latest/meta-data/",
		"http://[fd00:ec2::254]/",
		"http://100.100.100.200/",
		"http://10.0.0.1/",
		"http://0.0.0.0/",
		"http://[fe80::1%25eth0]/",
		"http://internal.example/",
		"http://mixed.example/",
		"http://metadata.example/",
		"http://mapped.example/",
		"http://localhost:6060/debug/pprof/",
	}
	for _, u := range urls {
		t.Run(u, func(t *testing.T) {
			res, err := f.Get(t.Context(), u, "")
			if !errors.Is(err, web.ErrForbiddenAddress) {
				t.Fatalf("Get(%s) = %+v, %v; want ErrForbiddenAddress", u, res, err)
			}
		})
	}
}

func TestFetchRefusesBadURLs(t *testing.T) {
	f := web.NewFetcher(web.FetchOptions{AllowPrivate: true})
	for _, u := range []string{"ftp://example.com/x", "file:///etc/passwd", "gopher://example.com", "http://user:pass@example.com/", "http:///nohost", "/relative"} {
		t.Run(u, func(t *testing.T) {
			if _, err := f.Get(t.Context(), u, ""); !errors.Is(err, web.ErrBadURL) {
				t.Fatalf("Get(%s) err = %v, want ErrBadURL", u, err)
			}
		})
	}
}

// newPinned starts h and returns a Fetcher on which host is pinned to it,
// and the server's own loopback address.
func newPinnedFetcher(t *testing.T, host string, h http.Handler, opts web.FetchOptions) (*web.Fetcher, string) {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	opts.Resolve = map[string]string{host: srv.Listener.Addr().String()}
	return web.NewFetcher(opts), srv.Listener.Addr().String()
}

func TestFetchResolvePinsDomain(t *testing.T) {
	body := `{"hello":"world"}`
	var gotHost, gotUA, gotAccept string
	f, addr := newPinnedFetcher(t, "Pub.Example", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotHost, gotUA, gotAccept = r.Host, r.UserAgent(), r.Header.Get("Accept")
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, body)
	}), web.FetchOptions{})

	res, err := f.Get(t.Context(), "https://pub.example/.well-known/ai-catalog.json", "application/json")
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256([]byte(body))
	switch {
	case res.Status != 200 || string(res.Body) != body:
		t.Fatalf("got %d %q", res.Status, res.Body)
	case res.URL != "https://pub.example/.well-known/ai-catalog.json":
		t.Errorf("URL = %q, want the URL as asked", res.URL)
	case res.SHA256 != hex.EncodeToString(sum[:]):
		t.Errorf("SHA256 = %s", res.SHA256)
	case res.Header.Get("Content-Type") != "application/json":
		t.Errorf("header lost: %v", res.Header)
	case gotHost != "pub.example":
		t.Errorf("server saw Host %q, want pub.example", gotHost)
	case !strings.HasPrefix(gotUA, "ardx/") || !strings.HasSuffix(gotUA, " (+ARD registry)"):
		t.Errorf("User-Agent = %q", gotUA)
	case gotAccept != "application/json":
		t.Errorf("Accept = %q", gotAccept)
	case time.Since(res.FetchedAt) > time.Minute:
		t.Errorf("FetchedAt = %v", res.FetchedAt)
	}

	// The pin lifts the check for that domain alone: the server's own
	// loopback address is still refused.
	if _, err := f.Get(t.Context(), "http://"+addr+"/", ""); !errors.Is(err, web.ErrForbiddenAddress) {
		t.Fatalf("loopback address fetched through a pinned Fetcher: %v", err)
	}
}

func TestFetchNon2xxIsAResult(t *testing.T) {
	f, _ := newPinnedFetcher(t, "pub.example", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "gone fishing", http.StatusServiceUnavailable)
	}), web.FetchOptions{})
	res, err := f.Get(t.Context(), "http://pub.example/", "")
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != http.StatusServiceUnavailable || !strings.Contains(string(res.Body), "gone fishing") {
		t.Fatalf("got %d %q", res.Status, res.Body)
	}
}

// TestFetchRedirects follows relative and absolute redirects on the pinned
// domain, and refuses one that leads into the network.
func TestFetchRedirects(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("/hop/{n}", func(w http.ResponseWriter, r *http.Request) {
		n, _ := strconv.Atoi(r.PathValue("n"))
		if n == 0 {
			_, _ = io.WriteString(w, "arrived")
			return
		}
		// Relative Location, resolved against the current URL.
		http.Redirect(w, r, strconv.Itoa(n-1), http.StatusFound)
	})
	mux.HandleFunc("/to-private", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "http://10.1.2.3/admin", http.StatusMovedPermanently)
	})
	mux.HandleFunc("/to-metadata-name", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "http://metadata.internal/latest/meta-data/", http.StatusFound)
	})
	mux.HandleFunc("/to-file", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Location", "file:///etc/passwd")
		w.WriteHeader(http.StatusFound)
	})
	lookup := func(_ context.Context, host string) ([]netip.Addr, error) {
		if host == "metadata.internal" {
			return []netip.Addr{netip.MustParseAddr("169.254.169.254")}, nil
		}
		return nil, errors.New("no such host")
	}
	f, _ := newPinnedFetcher(t, "pub.example", mux, web.FetchOptions{LookupNetIP: lookup})

	tests := []struct {
		path    string
		wantErr error
		wantURL string
	}{
		{"/hop/5", nil, "https://pub.example/hop/0"},
		{"/hop/6", web.ErrTooManyRedirects, ""},
		{"/to-private", web.ErrForbiddenAddress, ""},
		{"/to-metadata-name", web.ErrForbiddenAddress, ""},
		{"/to-file", web.ErrBadURL, ""},
	}
	for _, tc := range tests {
		t.Run(tc.path, func(t *testing.T) {
			res, err := f.Get(t.Context(), "https://pub.example"+tc.path, "")
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("err = %v, want %v", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if res.URL != tc.wantURL || string(res.Body) != "arrived" {
				t.Fatalf("got %s %q, want %s", res.URL, res.Body, tc.wantURL)
			}
		})
	}

	t.Run("MaxRedirects negative follows none", func(t *testing.T) {
		f, _ := newPinnedFetcher(t, "pub.example", mux, web.FetchOptions{MaxRedirects: -1})
		if _, err := f.Get(t.Context(), "http://pub.example/hop/1", ""); !errors.Is(err, web.ErrTooManyRedirects) {
			t.Fatalf("err = %v", err)
		}
	})
}

func TestFetchSizeCap(t *testing.T) {
	const max = 1000
	mux := http.NewServeMux()
	mux.HandleFunc("/len/{n}", func(w http.ResponseWriter, r *http.Request) {
		n, _ := strconv.Atoi(r.PathValue("n"))
		w.Header().Set("Content-Length", strconv.Itoa(n))
		_, _ = w.Write([]byte(strings.Repeat("a", n)))
	})
	mux.HandleFunc("/chunked/{n}", func(w http.ResponseWriter, r *http.Request) {
		n, _ := strconv.Atoi(r.PathValue("n"))
		// Flushing before the end forces chunked encoding: no length is
		// declared, so only counting can catch it.
		for i := 0; i < n; i += 100 {
			_, _ = w.Write([]byte(strings.Repeat("b", min(100, n-i))))
			w.(http.Flusher).Flush()
		}
	})
	f, _ := newPinnedFetcher(t, "pub.example", mux, web.FetchOptions{MaxBytes: max})
	tests := []struct {
		path    string
		wantLen int
		wantErr error
	}{
		{"/len/1000", 1000, nil},
		{"/len/1001", 0, web.ErrTooLarge},
		{"/chunked/1000", 1000, nil},
		{"/chunked/1001", 0, web.ErrTooLarge},
		{"/chunked/50000", 0, web.ErrTooLarge},
	}
	for _, tc := range tests {
		t.Run(tc.path, func(t *testing.T) {
			res, err := f.Get(t.Context(), "http://pub.example"+tc.path, "")
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("err = %v, want %v", err, tc.wantErr)
				}
				return
			}
			if err != nil || len(res.Body) != tc.wantLen {
				t.Fatalf("got %v, err %v", res, err)
			}
		})
	}

	t.Run("HTTPClient caps bodies too", func(t *testing.T) {
		resp, err := f.HTTPClient().Get("http://pub.example/chunked/5000")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if _, err := io.ReadAll(resp.Body); !errors.Is(err, web.ErrTooLarge) {
			t.Fatalf("err = %v, want ErrTooLarge", err)
		}
	})
}

func TestFetchTimeout(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	mux := http.NewServeMux()
	mux.HandleFunc("/slow-headers", func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	mux.HandleFunc("/slow-body", func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "start")
		w.(http.Flusher).Flush()
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	f, _ := newPinnedFetcher(t, "pub.example", mux, web.FetchOptions{Timeout: 200 * time.Millisecond})
	for _, path := range []string{"/slow-headers", "/slow-body"} {
		t.Run(path, func(t *testing.T) {
			start := time.Now()
			_, err := f.Get(t.Context(), "http://pub.example"+path, "")
			var ne net.Error
			if !errors.As(err, &ne) || !ne.Timeout() {
				t.Fatalf("err = %v, want a timeout", err)
			}
			if d := time.Since(start); d > 3*time.Second {
				t.Fatalf("timeout of 200ms took %v", d)
			}
		})
	}
}

func TestFetchAllowPrivate(t *testing.T) {
	var hits int
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits++
		_, _ = io.WriteString(w, "local")
	}))
	defer srv.Close()

	if _, err := web.NewFetcher(web.FetchOptions{}).Get(t.Context(), srv.URL, ""); !errors.Is(err, web.ErrForbiddenAddress) {
		t.Fatalf("default Fetcher reached loopback: %v", err)
	}
	if hits != 0 {
		t.Fatalf("server was reached %d times by a refused fetch", hits)
	}

	// A name resolved through the hook is dialled at exactly the address
	// the hook gave (the system resolver knows no such name).
	lookup := func(_ context.Context, host string) ([]netip.Addr, error) {
		if host == "dev.invalid" {
			return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
		}
		return nil, errors.New("no such host")
	}
	f := web.NewFetcher(web.FetchOptions{AllowPrivate: true, LookupNetIP: lookup})
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	for _, u := range []string{srv.URL, "http://dev.invalid:" + port + "/"} {
		res, err := f.Get(t.Context(), u, "")
		if err != nil || string(res.Body) != "local" {
			t.Fatalf("Get(%s) = %v, %v", u, res, err)
		}
	}
	// Metadata addresses stay refused even so.
	if _, err := f.Get(t.Context(), "http://169.254.169.254/latest/meta-data/", ""); !errors.Is(err, web.ErrForbiddenAddress) {
		t.Fatalf("metadata address with AllowPrivate: %v", err)
	}
}

func TestFetchDoPost(t *testing.T) {
	f, _ := newPinnedFetcher(t, "mcp.example", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = fmt.Fprintf(w, `{"method":%q,"echo":%s}`, r.Method, b)
	}), web.FetchOptions{})
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, "https://mcp.example/mcp", strings.NewReader(`{"jsonrpc":"2.0"}`))
	req.Header.Set("Content-Type", "application/json")
	res, err := f.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"method":"POST","echo":{"jsonrpc":"2.0"}}`; string(res.Body) != want {
		t.Fatalf("body = %s, want %s", res.Body, want)
	}
}
