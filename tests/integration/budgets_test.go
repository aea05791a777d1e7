package integration

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestBudgetsConfig: [budgets] reaches the daemon. /v1/info reports the
// result and body budgets the file set, and the body budget is the one
// enforced: with bodies = "64M", a 40 MiB body held open (its length
// declared, so reserved before a byte is read) leaves no room for a
// second 40 MiB body, which gets 429; the default budget (128 MiB) would
// take both.
func TestBudgetsConfig(t *testing.T) {
	const mib = 1 << 20
	d := startDaemon(t, "--config", writeConf(t, "[budgets]\nresults = \"32M\"\nbodies = \"64M\"\npeer_conns_per_second = 64\n"))
	info, err := d.client.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if info.ResultBudgetBytes != 32*mib || info.BodyBudgetBytes != 64*mib {
		t.Fatalf("/v1/info: result_budget_bytes %d, body_budget_bytes %d; want %d and %d from [budgets]", info.ResultBudgetBytes, info.BodyBudgetBytes, 32*mib, 64*mib)
	}

	const size = 40 * mib
	held, err := net.Dial("unix", d.sock)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	if _, err := fmt.Fprintf(held, "POST /v1/runs HTTP/1.1\r\nHost: nsbox\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n{", size); err != nil {
		t.Fatal(err)
	}
	body := `{"argv":["true"],"env":{"PAD":"` + strings.Repeat("y", size-40) + `"}}`
	// The held body is reserved once its handler runs; until then the
	// second one may still fit (and is answered as any run). The deadline
	// only ends a daemon that never refuses it.
	for deadline := time.Now().Add(20 * time.Second); ; {
		resp, err := d.http.Post("http://nsbox/v1/runs", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		msg, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode == http.StatusTooManyRequests {
			if !strings.Contains(string(msg), "64 MiB budget") {
				t.Errorf("429 %s: want it to name the 64 MiB budget", msg)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a second 40 MiB body beside a held one: %d %.300s; want 429 under [budgets] bodies = \"64M\"", resp.StatusCode, msg)
		}
	}
}
