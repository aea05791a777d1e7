package egress

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
)

// benchSetup serves size bytes at /blob on loopback and returns the
// direct URL, the URL by name and a proxy's address.
func benchSetup(b *testing.B, size int64, tls bool) (srv *httptest.Server, direct, named, proxy string) {
	b.Helper()
	blob := make([]byte, 1<<20)
	srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", strconv.FormatInt(size, 10))
		for left := size; left > 0; left -= int64(len(blob)) {
			w.Write(blob[:min(left, int64(len(blob)))])
		}
	}))
	name, scheme := "files.test", "http"
	if tls {
		name, scheme = "example.com", "https" // the test certificate's name
		srv.StartTLS()
	} else {
		srv.Start()
	}
	b.Cleanup(srv.Close)
	tn := &testNet{names: map[string]string{name: "127.0.0.1"}}
	port := strconv.Itoa(tn.serve(b, srv))
	_, addr := startProxy(b, tn.options(), Policy{Allow: mustRules(b, name+":"+port)})
	return srv, srv.URL + "/blob", scheme + "://" + name + ":" + port + "/blob", addr
}

func fetch(b *testing.B, c *http.Client, u string) {
	resp, err := c.Get(u)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		b.Fatal(err)
	}
	resp.Body.Close()
}

// BenchmarkDownload is the throughput of one 100 MiB download, straight
// from a loopback server and through the proxy; the tls pair is the same
// over HTTPS, where the proxy is a CONNECT tunnel.
func BenchmarkDownload(b *testing.B) {
	const size = 100 << 20
	_, direct, named, proxy := benchSetup(b, size, false)
	b.Run("direct", func(b *testing.B) {
		c := &http.Client{Transport: &http.Transport{}}
		b.SetBytes(size)
		for b.Loop() {
			fetch(b, c, direct)
		}
	})
	b.Run("proxied", func(b *testing.B) {
		c := proxiedClient(proxy, nil)
		c.Transport.(*http.Transport).DisableKeepAlives = false
		b.SetBytes(size)
		for b.Loop() {
			fetch(b, c, named)
		}
	})
	srv, direct, named, proxy := benchSetup(b, size, true)
	b.Run("direct-tls", func(b *testing.B) {
		c := srv.Client()
		b.SetBytes(size)
		for b.Loop() {
			fetch(b, c, direct)
		}
	})
	b.Run("tunnelled-tls", func(b *testing.B) {
		c := proxiedClient(proxy, certPool(b, srv))
		c.Transport.(*http.Transport).DisableKeepAlives = false
		b.SetBytes(size)
		for b.Loop() {
			fetch(b, c, named)
		}
	})
}

// BenchmarkFirstByte is a new connection's time to the first byte of a
// small answer: what the proxy adds to every short request (its
// resolution, check and dial).
func BenchmarkFirstByte(b *testing.B) {
	_, direct, named, proxy := benchSetup(b, 1, false)
	b.Run("direct", func(b *testing.B) {
		c := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
		for b.Loop() {
			fetch(b, c, direct)
		}
	})
	b.Run("proxied", func(b *testing.B) {
		c := proxiedClient(proxy, nil)
		for b.Loop() {
			fetch(b, c, named)
		}
	})
}
