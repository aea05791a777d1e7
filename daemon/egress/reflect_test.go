package egress

import (
	"compress/gzip"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"unicode/utf16"
)

// reflectValue has what encodings treat apart: '/', '+', a space, a
// quote, a backslash and a non-ASCII letter.
const reflectValue = `k3y/Zq7+Wm9 Xk4"Tr8\R2dé8Vn3Lb6Hj1`

// b64Inner is the part of the base64 of prefix+v that depends on v's
// bytes alone: what a server encoding the value after len(prefix) bytes
// hands back whatever those bytes are.
func b64Inner(enc *base64.Encoding, prefix, v string) string {
	full := enc.EncodeToString([]byte(prefix + v))
	from := (len(prefix) + 2) / 3 * 4
	to := (len(prefix) + len(v)) / 3 * 4
	return full[from:to]
}

// raw answers with what it writes on the connection itself: a status
// line, header names and malformed lines net/http would never write.
func raw(w http.ResponseWriter, s string) {
	c, rw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		panic(err)
	}
	defer c.Close()
	rw.WriteString(s)
	rw.Flush()
}

// TestSecretReflected: a host bound to a secret that echoes the request
// header back, in each form a server plausibly uses, never hands the
// value to the sandbox: the placeholder goes out, the value is swapped in
// upstream, and what comes back holds neither the value nor the form the
// server wrote it in.
func TestSecretReflected(t *testing.T) {
	v := reflectValue
	half := len(v) / 2
	gz := func(s string) []byte {
		var b strings.Builder
		zw := gzip.NewWriter(&b)
		io.WriteString(zw, s)
		zw.Close()
		return []byte(b.String())
	}
	cases := []struct {
		name    string
		reflect func(w http.ResponseWriter, got string)
		leaks   []string // what of the value the server wrote, besides the value itself
	}{
		{"body", func(w http.ResponseWriter, got string) { io.WriteString(w, got) }, nil},
		{"body in two chunks", func(w http.ResponseWriter, got string) {
			io.WriteString(w, got[:half])
			w.(http.Flusher).Flush()
			io.WriteString(w, got[half:])
		}, nil},
		{"gzip body", func(w http.ResponseWriter, got string) {
			w.Header().Set("Content-Encoding", "gzip")
			w.Write(gz(got))
		}, nil},
		{"header value", func(w http.ResponseWriter, got string) { w.Header().Set("X-Echo", got) }, nil},
		{"split across two headers", func(w http.ResponseWriter, got string) {
			w.Header().Set("X-A", got[:half])
			w.Header().Set("X-B", got[half:])
		}, []string{v[:half], v[half:]}},
		{"trailer", func(w http.ResponseWriter, got string) {
			w.Header().Set("Trailer", "X-Echo")
			io.WriteString(w, "body")
			w.Header().Set("X-Echo", got)
		}, nil},
		{"reason phrase", func(w http.ResponseWriter, got string) {
			raw(w, "HTTP/1.1 200 "+got+"\r\nContent-Length: 2\r\n\r\nok")
		}, nil},
		{"header name", func(w http.ResponseWriter, got string) {
			raw(w, "HTTP/1.1 200 OK\r\nX-"+url.QueryEscape(got)+": 1\r\nContent-Length: 2\r\n\r\nok")
		}, []string{url.QueryEscape(v)}},
		{"malformed answer quoted in the proxy's error", func(w http.ResponseWriter, got string) {
			raw(w, "HTTP/1.1 200 OK\r\nX"+got+"\r\n\r\n")
		}, strings.Split(strings.Trim(strconv.Quote(v), `"`), "é")}, // Go quotes it; the status line has no room for é
		{"percent-encoded, upper hex, + for space", func(w http.ResponseWriter, got string) {
			io.WriteString(w, "q="+url.QueryEscape(got))
		}, []string{url.QueryEscape(v)}},
		{"percent-encoded, lower hex", func(w http.ResponseWriter, got string) {
			io.WriteString(w, strings.ToLower(url.PathEscape(got)))
		}, []string{url.PathEscape(v)}},
		{"base64 at offset 0", func(w http.ResponseWriter, got string) {
			io.WriteString(w, base64.StdEncoding.EncodeToString([]byte(got)))
		}, []string{b64Inner(base64.StdEncoding, "", v)}},
		{"base64 at offset 1", func(w http.ResponseWriter, got string) {
			io.WriteString(w, base64.StdEncoding.EncodeToString([]byte("u"+got)))
		}, []string{b64Inner(base64.StdEncoding, "u", v)}},
		{"base64 at offset 2", func(w http.ResponseWriter, got string) {
			io.WriteString(w, base64.StdEncoding.EncodeToString([]byte("us"+got)))
		}, []string{b64Inner(base64.StdEncoding, "us", v)}},
		{"base64url at offset 1", func(w http.ResponseWriter, got string) {
			io.WriteString(w, base64.RawURLEncoding.EncodeToString([]byte("u"+got)))
		}, []string{b64Inner(base64.URLEncoding, "u", v)}},
		{"JSON-escaped", func(w http.ResponseWriter, got string) {
			json.NewEncoder(w).Encode(map[string]string{"authorization": got})
		}, []string{strings.Trim(mustJSON(v), `"`)}},
		{"JSON, ASCII only", func(w http.ResponseWriter, got string) {
			io.WriteString(w, `{"a":"`+jsonASCII(got)+`"}`)
		}, []string{jsonASCII(v)}},
		{"case-changed", func(w http.ResponseWriter, got string) { io.WriteString(w, strings.ToUpper(got)) }, nil},
		{"hex", func(w http.ResponseWriter, got string) { io.WriteString(w, hex.EncodeToString([]byte(got))) },
			[]string{hex.EncodeToString([]byte(v))}},
	}

	var mu sync.Mutex
	var proxyAuth []string
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		proxyAuth = append(proxyAuth, r.Header.Values("Proxy-Authorization")...)
		mu.Unlock()
		i, _ := strconv.Atoi(r.URL.Query().Get("case"))
		cases[i].reflect(w, r.Header.Get("X-Key"))
	}))
	defer srv.Close()
	tn := &testNet{names: map[string]string{"api.example.com": "127.0.0.1"}}
	ps := strconv.Itoa(tn.serve(t, srv))
	ca, err := LoadOrCreateCA(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	opts := tn.options()
	opts.CA, opts.RootCAs = ca, certPool(t, srv)
	p, addr := startProxy(t, opts, Policy{
		Allow:   mustRules(t, "api.example.com:"+ps),
		Secrets: []Secret{{Name: "KEY", Value: v, Hosts: mustRules(t, "api.example.com:"+ps)}},
	})
	roots := certPool(t, srv)
	roots.AppendCertsFromPEM(p.CABundle())
	c := proxiedClient(addr, roots)
	placeholder := p.placeholders["KEY"]

	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequest("GET", "https://api.example.com:"+ps+"/?case="+strconv.Itoa(i), nil)
			req.Header.Set("X-Key", placeholder)
			resp, err := c.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil {
				t.Fatal(err)
			}
			var view strings.Builder
			fmt.Fprintf(&view, "%s\n", resp.Status)
			resp.Header.Write(&view)
			view.Write(body)
			resp.Trailer.Write(&view)
			seen := strings.ToLower(view.String())
			for _, leak := range append(tc.leaks, v) {
				if strings.Contains(seen, strings.ToLower(leak)) {
					t.Errorf("the sandbox got %q:\n%s", leak, view.String())
				}
			}
			if tc.name == "body" && (resp.ContentLength != int64(len(v)) || len(body) != len(v)) {
				t.Errorf("Content-Length %d, body of %d bytes, want %d masked in place", resp.ContentLength, len(body), len(v))
			}
		})
	}
	t.Run("HEAD of a gzip answer", func(t *testing.T) {
		req, _ := http.NewRequest("HEAD", "https://api.example.com:"+ps+"/?case=2", nil)
		req.Header.Set("X-Key", placeholder)
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("HEAD: %s", resp.Status)
		}
	})
	t.Run("Proxy-Authorization is not forwarded", func(t *testing.T) {
		req, _ := http.NewRequest("GET", "https://api.example.com:"+ps+"/?case=0", nil)
		req.Header.Set("Proxy-Authorization", "Basic "+placeholder)
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		mu.Lock()
		defer mu.Unlock()
		if len(proxyAuth) != 0 {
			t.Errorf("the upstream got Proxy-Authorization %q", proxyAuth)
		}
	})
}

func mustJSON(v string) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// jsonASCII is v as Python's json.dumps writes it (every non-ASCII rune
// as \uXXXX): what the reflecting host sends.
func jsonASCII(v string) string {
	b, _ := json.Marshal(v)
	var out strings.Builder
	for _, r := range string(b[1 : len(b)-1]) {
		if r > 0x7e {
			for _, u := range utf16.Encode([]rune{r}) {
				fmt.Fprintf(&out, `\u%04x`, u)
			}
			continue
		}
		out.WriteRune(r)
	}
	return out.String()
}
