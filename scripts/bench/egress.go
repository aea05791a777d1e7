package bench

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/nsbox/nsbox/agentapi"
	"github.com/nsbox/nsbox/daemon/egress/egresstest"
	"github.com/nsbox/nsbox/rootfs"
	"github.com/nsbox/nsbox/scripts/bench/benchd"
	"github.com/nsbox/nsbox/scripts/bench/measure"
)

// The egress part measures what the proxy costs against the same client
// talking to the same loopback server directly from the host: a 100 MiB
// download, the time to the first byte of a new connection, and a pip
// install of the same wheel uncached and from the daemon's cache.
const (
	egressDownload = 100 << 20
	egressRounds   = 5
	egressConns    = 50 // new connections per first-byte round
	egressWheel    = 20 << 20
	egressHost     = "bench.test"
	// egressCPUs is the sandbox's CPU limit: the host's client has no
	// limit either.
	egressCPUs = 2
)

// egressRow is one line of the egress table.
type egressRow struct {
	What     string  `json:"what"`
	Unit     string  `json:"unit"`
	Baseline string  `json:"baseline"`
	Base     float64 `json:"baseline_value"`
	Value    float64 `json:"value"`
	Ratio    float64 `json:"ratio"` // value / baseline
	Target   string  `json:"target,omitempty"`
}

// egressClient is the client both sides run: PROXY ("" for none), the
// URL; it prints one JSON object. mode "download" reads the body in 1 MiB
// chunks and reports bytes/s; "ttfb" opens n new connections and reports
// each one's time to the response's head in ms.
const egressClient = `
import http.client, json, ssl, sys, time, urllib.parse
mode, proxy, url, n, ca = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5]
u = urllib.parse.urlsplit(url)
path = u.path + ("?" + u.query if u.query else "")
def conn():
    if u.scheme == "https":
        ctx = ssl.create_default_context(cafile=ca)
        if proxy:
            c = http.client.HTTPSConnection("127.0.0.1", int(proxy), context=ctx)
            c.set_tunnel(u.hostname, u.port)
            return c, path
        return http.client.HTTPSConnection(u.hostname, u.port, context=ctx), path
    if proxy:
        return http.client.HTTPConnection("127.0.0.1", int(proxy)), url
    return http.client.HTTPConnection(u.hostname, u.port), path
if mode == "download":
    c, target = conn()
    t0 = time.perf_counter()
    c.request("GET", target)
    r = c.getresponse()
    got = 0
    while True:
        b = r.read(1 << 20)
        if not b:
            break
        got += len(b)
    dt = time.perf_counter() - t0
    print(json.dumps({"bytes": got, "rate": got / dt}))
else:
    ms = []
    for _ in range(n):
        c, target = conn()
        t0 = time.perf_counter()
        c.request("GET", target)
        r = c.getresponse()
        ms.append((time.perf_counter() - t0) * 1000)
        r.read()
        c.close()
    print(json.dumps({"ms": ms}))
`

func benchEgress(ctx context.Context, o Options, rep *report) error {
	if o.Socket != "" {
		rep.Skipped = append(rep.Skipped, "egress: needs a private daemon with a [network] config (not --socket)")
		return nil
	}
	hostPy, err := exec.LookPath("python3")
	if err != nil {
		rep.Skipped = append(rep.Skipped, "egress: no python3 on the host for the direct baseline")
		return nil
	}
	index, err := egresstest.NewIndex(egressWheel)
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.Handle("/", index)
	mux.HandleFunc("/big", func(w http.ResponseWriter, r *http.Request) {
		n, _ := strconv.Atoi(r.URL.Query().Get("n"))
		w.Header().Set("Content-Length", strconv.Itoa(n))
		chunk := make([]byte, 1<<20)
		for n > 0 {
			k := min(n, len(chunk))
			if _, err := w.Write(chunk[:k]); err != nil {
				return
			}
			n -= k
		}
	})
	mux.HandleFunc("/hello", func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("hello")) })
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: mux}
	go srv.Serve(ln)
	defer srv.Close()
	port := ln.Addr().(*net.TCPAddr).Port
	// The same server over TLS: what most downloads are.
	cert, caPEM, err := egresstest.NewCert(egressHost, "127.0.0.1")
	if err != nil {
		return err
	}
	tln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	tsrv := &http.Server{Handler: mux, TLSConfig: &tls.Config{Certificates: []tls.Certificate{*cert}}}
	go tsrv.ServeTLS(tln, "", "")
	defer tsrv.Close()
	tport := tln.Addr().(*net.TCPAddr).Port
	caFile := filepath.Join(os.TempDir(), "nsbox-bench-ca-"+strconv.Itoa(os.Getpid())+".pem")
	if err := os.WriteFile(caFile, caPEM, 0o644); err != nil {
		return err
	}
	defer os.Remove(caFile)

	conf := fmt.Sprintf("# nsbox bench: egress\n[network]\nallow = [\"%s:%d\", \"%s:%d\"]\nopen = [\"127.0.0.1:%d\", \"127.0.0.1:%d\"]\ncache = \"1GiB\"\n\n[network.hosts]\n%q = \"127.0.0.1\"\n",
		egressHost, port, egressHost, tport, port, tport, egressHost)
	nsbox, err := o.nsbox()
	if err != nil {
		return err
	}
	d, err := benchd.Start(nsbox, o.Store, o.Rootfs, conf, "--pool-size", "0")
	if err != nil {
		return err
	}
	defer d.Close()
	network := &agentapi.Network{Allow: []string{fmt.Sprintf("%s:%d", egressHost, port), fmt.Sprintf("%s:%d", egressHost, tport)}}
	url := func(path string) string { return fmt.Sprintf("http://%s:%d%s", egressHost, port, path) }
	turl := func(path string) string { return fmt.Sprintf("https://%s:%d%s", egressHost, tport, path) }

	// The sandbox runs the client through the proxy; the host runs it
	// directly to 127.0.0.1 (the name resolves there).
	sandbox := func(args ...string) (map[string]any, error) {
		res, err := d.Client.Run(ctx, &agentapi.RunRequest{Argv: append([]string{"python3", "-c", egressClient}, append(args, "ca.pem")...),
			Network: network, Limits: &agentapi.Limits{TimeoutMs: 120_000, CPUs: egressCPUs}, Files: []agentapi.File{{Path: "ca.pem", Text: string(caPEM)}}})
		if err != nil {
			return nil, err
		}
		if res.Status != agentapi.StatusOK {
			return nil, fmt.Errorf("sandbox client: %s %s%s", res.Status, res.Error, res.Stderr)
		}
		return decodeLine(res.Stdout)
	}
	host := func(args ...string) (map[string]any, error) {
		out, err := exec.CommandContext(ctx, hostPy, append([]string{"-c", egressClient}, append(args, caFile)...)...).Output()
		if err != nil {
			return nil, fmt.Errorf("host client: %w", err)
		}
		return decodeLine(string(out))
	}
	direct := func(path string) string { return fmt.Sprintf("http://127.0.0.1:%d%s", port, path) }
	tdirect := func(path string) string { return fmt.Sprintf("https://127.0.0.1:%d%s", tport, path) }

	before := measure.LoadAvg()
	defer func() { rep.EgressLoad = before + " -> " + measure.LoadAvg() }()
	var directRate, proxRate, tdirectRate, tproxRate []float64
	var directMs, proxMs []float64
	for range egressRounds {
		big := fmt.Sprintf("/big?n=%d", egressDownload)
		h, err := host("download", "", direct(big), "1")
		if err != nil {
			return err
		}
		s, err := sandbox("download", "3128", url(big), "1")
		if err != nil {
			return err
		}
		directRate, proxRate = append(directRate, h["rate"].(float64)), append(proxRate, s["rate"].(float64))
		if h, err = host("download", "", tdirect(big), "1"); err != nil {
			return err
		}
		if s, err = sandbox("download", "3128", turl(big), "1"); err != nil {
			return err
		}
		tdirectRate, tproxRate = append(tdirectRate, h["rate"].(float64)), append(tproxRate, s["rate"].(float64))
		h, err = host("ttfb", "", direct("/hello"), strconv.Itoa(egressConns))
		if err != nil {
			return err
		}
		s, err = sandbox("ttfb", "3128", url("/hello"), strconv.Itoa(egressConns))
		if err != nil {
			return err
		}
		directMs, proxMs = append(directMs, floats(h["ms"])...), append(proxMs, floats(s["ms"])...)
	}
	tdr, tpr := measure.Median(tdirectRate)/(1<<20), measure.Median(tproxRate)/(1<<20)
	rep.Egress = append(rep.Egress, egressRow{What: "download 100 MiB, HTTPS (CONNECT tunnel)", Unit: "MiB/s", Baseline: "the same client on the host, direct",
		Base: tdr, Value: tpr, Ratio: tpr / tdr, Target: ">= 0.8x direct"})
	dr, pr := measure.Median(directRate)/(1<<20), measure.Median(proxRate)/(1<<20)
	rep.Egress = append(rep.Egress, egressRow{What: "download 100 MiB, plain HTTP (forwarded)", Unit: "MiB/s", Baseline: "the same client on the host, direct",
		Base: dr, Value: pr, Ratio: pr / dr, Target: ">= 0.8x direct"})
	dm, pm := measure.Median(directMs), measure.Median(proxMs)
	rep.Egress = append(rep.Egress, egressRow{What: "first byte, new connection (p50)", Unit: "ms", Baseline: "the same client on the host, direct",
		Base: dm, Value: pm, Ratio: pm / dm, Target: "<= 1 ms added"})

	// pip, on the data-science rootfs: each round its own index URL, so
	// its first install fetches the wheel and its second is served from
	// the daemon's cache.
	datasci := ""
	if r, err := (rootfs.Store{Root: o.Store}).Lookup(rootfs.DefaultName); err == nil {
		if _, err := os.Stat(filepath.Join(r.Dir, "usr/lib/python3/dist-packages/pip")); err == nil {
			datasci = rootfs.DefaultName
		}
	}
	if datasci == "" {
		rep.Skipped = append(rep.Skipped, "egress pip install: no rootfs \"default\" with pip (make rootfs-default)")
		return nil
	}
	var uncached, cached []float64
	for i := range egressRounds {
		cmd := fmt.Sprintf("python3 -m pip install -q --index-url %s --trusted-host %s %s", url(fmt.Sprintf("/r%d/simple/", i)), egressHost, egresstest.Package)
		for k := range 2 {
			start := time.Now()
			res, err := d.Client.Run(ctx, &agentapi.RunRequest{Language: agentapi.LanguageBash, Code: cmd, Rootfs: datasci, Network: network,
				Limits: &agentapi.Limits{TimeoutMs: 120_000, DiskBytes: 256 << 20}})
			if err != nil {
				return err
			}
			if res.Status != agentapi.StatusOK {
				return fmt.Errorf("pip install: %s %s%s", res.Status, res.Error, res.Stderr)
			}
			ms := float64(time.Since(start).Microseconds()) / 1000
			if k == 0 {
				uncached = append(uncached, ms)
			} else {
				cached = append(cached, ms)
			}
		}
	}
	if got := index.Downloads(); got != egressRounds {
		return fmt.Errorf("egress: the index served the wheel %d times in %d rounds; the cache should have served the rest", got, egressRounds)
	}
	u, c := measure.Median(uncached), measure.Median(cached)
	rep.Egress = append(rep.Egress, egressRow{What: fmt.Sprintf("pip install, %d MiB wheel, from the cache (p50)", egressWheel>>20), Unit: "ms",
		Baseline: "the same install fetching the wheel", Base: u, Value: c, Ratio: c / u})
	return nil
}

func decodeLine(s string) (map[string]any, error) {
	var m map[string]any
	if err := json.Unmarshal([]byte(strings.TrimSpace(s)), &m); err != nil {
		return nil, fmt.Errorf("client output %q: %w", s, err)
	}
	return m, nil
}

func floats(v any) []float64 {
	l, _ := v.([]any)
	out := make([]float64, 0, len(l))
	for _, x := range l {
		if f, ok := x.(float64); ok {
			out = append(out, f)
		}
	}
	sort.Float64s(out)
	return out
}
