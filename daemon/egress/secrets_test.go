package egress

import (
	"bytes"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

func TestLoadOrCreateCA(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "ca")
	ca, err := LoadOrCreateCA(dir)
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]os.FileMode{".": 0o700, "ca.key": 0o600} {
		if fi, err := os.Stat(filepath.Join(dir, name)); err != nil || fi.Mode().Perm() != want {
			t.Errorf("%s: %v %v, want mode %v", name, fi.Mode(), err, want)
		}
	}
	again, err := LoadOrCreateCA(dir)
	if err != nil || !bytes.Equal(again.CertPEM(), ca.CertPEM()) {
		t.Fatalf("reloaded CA differs (%v)", err)
	}
	leaf, err := again.leaf("api.example.com")
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca.CertPEM())
	if _, err := leaf.Leaf.Verify(x509.VerifyOptions{DNSName: "api.example.com", Roots: pool}); err != nil {
		t.Errorf("leaf does not verify under the CA: %v", err)
	}
	os.Remove(filepath.Join(dir, "ca.pem"))
	if _, err := LoadOrCreateCA(dir); err == nil {
		t.Error("a key without its certificate was replaced silently")
	}
}

func TestSecrets(t *testing.T) {
	// The server answers with the Authorization header it got.
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Echo", r.Header.Get("Authorization"))
		fmt.Fprint(w, r.Header.Get("Authorization"))
	}))
	defer srv.Close()
	tn := &testNet{names: map[string]string{"api.example.com": "127.0.0.1", "other.example.com": "127.0.0.1"}}
	ps := strconv.Itoa(tn.serve(t, srv))
	ca, err := LoadOrCreateCA(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	opts := tn.options()
	opts.CA, opts.RootCAs = ca, certPool(t, srv)
	pol := Policy{
		Allow:   mustRules(t, "api.example.com:"+ps, "other.example.com:"+ps),
		Secrets: []Secret{{Name: "API_TOKEN", Value: "real-value-42", Hosts: mustRules(t, "api.example.com:"+ps)}},
	}
	if _, err := New(tn.options(), "r", pol); !errors.Is(err, ErrNoCA) {
		t.Errorf("New without a CA: %v", err)
	}
	p, addr := startProxy(t, opts, pol)

	var placeholder string
	env := p.Env("127.0.0.1:3128", "/etc/nsbox-ca.pem")
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "API_TOKEN="); ok {
			placeholder = v
		}
	}
	if len(placeholder) != len("nsbox-secret-")+32 || !strings.HasPrefix(placeholder, "nsbox-secret-") {
		t.Fatalf("placeholder %q in %v", placeholder, env)
	}
	for _, want := range []string{"HTTPS_PROXY=http://127.0.0.1:3128", "https_proxy=http://127.0.0.1:3128", "NO_PROXY=localhost,127.0.0.1,::1", "SSL_CERT_FILE=/etc/nsbox-ca.pem", "REQUESTS_CA_BUNDLE=/etc/nsbox-ca.pem"} {
		if !slices.Contains(env, want) {
			t.Errorf("Env lacks %s: %v", want, env)
		}
	}
	if strings.Contains(strings.Join(env, "\n"), "real-value-42") {
		t.Error("the secret's value is in the sandbox's environment")
	}

	// The sandbox trusts CABundle (for the terminated host) and, for the
	// other one, which is tunnelled untouched, the test server itself.
	roots := certPool(t, srv)
	if !roots.AppendCertsFromPEM(p.CABundle()) {
		t.Fatal("CABundle holds no certificate")
	}
	c := proxiedClient(addr, roots)
	// The server got the value; what it echoed comes back masked.
	for host, want := range map[string]string{"api.example.com": "Bearer *************", "other.example.com": "Bearer " + placeholder} {
		req, _ := http.NewRequest("GET", "https://"+host+":"+ps+"/", nil)
		req.Header.Set("Authorization", "Bearer "+placeholder)
		resp, err := c.Do(req)
		if err != nil {
			t.Fatalf("%s: %v", host, err)
		}
		var body bytes.Buffer
		body.ReadFrom(resp.Body)
		resp.Body.Close()
		if body.String() != want {
			t.Errorf("%s saw %q, want %q", host, body.String(), want)
		}
		if echo := resp.Header.Get("X-Echo"); strings.Contains(echo, "real-value-42") {
			t.Errorf("%s: the value came back to the sandbox in a header: %q", host, echo)
		}
	}
	rep := p.Close()
	if len(rep.Records) != 2 {
		t.Fatalf("records %+v", rep.Records)
	}
	for _, r := range rep.Records {
		if want := r.Host == "api.example.com"; slices.Equal(r.Secrets, []string{"API_TOKEN"}) != want || !r.Allowed || r.Sent == 0 || r.Received == 0 {
			t.Errorf("record %+v", r)
		}
	}
}

// TestSecretHostHeader: inside a terminated tunnel, a Host header naming
// another site is refused, so a shared front cannot route the secret there.
func TestSecretHostHeader(t *testing.T) {
	var hits int
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits++ }))
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
		Secrets: []Secret{{Name: "T", Value: "v", Hosts: mustRules(t, "api.example.com:"+ps)}},
	})
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(p.CABundle())
	req, _ := http.NewRequest("GET", "https://api.example.com:"+ps+"/", nil)
	req.Host = "evil.example.com"
	resp, err := proxiedClient(addr, roots).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMisdirectedRequest || hits != 0 {
		t.Errorf("got %d, server hit %d times", resp.StatusCode, hits)
	}
}

// TestSecretOverPlainHTTP: a plain-HTTP request to a secret's host that
// carries the placeholder is refused, saying secrets are swapped on HTTPS
// only (it was forwarded and the upstream got the placeholder); one
// without the placeholder goes through.
func TestSecretOverPlainHTTP(t *testing.T) {
	rc := &recorder{}
	srv := httptest.NewServer(rc)
	defer srv.Close()
	tn := &testNet{names: map[string]string{"api.example.com": "127.0.0.1"}}
	ps := strconv.Itoa(tn.serve(t, srv))
	ca, err := LoadOrCreateCA(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	opts := tn.options()
	opts.CA = ca
	p, addr := startProxy(t, opts, Policy{
		Allow:   mustRules(t, "api.example.com:"+ps),
		Secrets: []Secret{{Name: "API_TOKEN", Value: "real-value-42", Hosts: mustRules(t, "api.example.com:"+ps)}},
	})
	var placeholder string
	for _, kv := range p.Env("127.0.0.1:3128", "/ca.pem") {
		if v, ok := strings.CutPrefix(kv, "API_TOKEN="); ok {
			placeholder = v
		}
	}
	c := proxiedClient(addr, nil)
	for _, tc := range []struct {
		name, auth, query string
		want              int
	}{
		{"in a header", "Bearer " + placeholder, "", http.StatusForbidden},
		{"in the URL", "", "?token=" + placeholder, http.StatusForbidden},
		{"none", "", "", http.StatusOK},
	} {
		req, _ := http.NewRequest("GET", "http://api.example.com:"+ps+"/"+tc.query, nil)
		if tc.auth != "" {
			req.Header.Set("Authorization", tc.auth)
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.want {
			t.Errorf("%s: %d %q, want %d", tc.name, resp.StatusCode, body, tc.want)
		}
		if tc.want == http.StatusForbidden && !strings.Contains(string(body), "secrets are swapped on HTTPS only") {
			t.Errorf("%s: answer %q does not say why", tc.name, body)
		}
	}
	if len(rc.hdrs) != 1 {
		t.Errorf("the upstream got %d requests, want only the one without a placeholder", len(rc.hdrs))
	}
	rep := p.Close()
	if len(rep.Records) != 3 || rep.Refused != 2 || !strings.Contains(rep.Records[0].Reason, "placeholder of API_TOKEN: use https://api.example.com") {
		t.Errorf("report %+v", rep)
	}
}
