package server

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nsbox/nsbox/daemon/policy"

	"github.com/nsbox/nsbox/agentapi"
	"github.com/nsbox/nsbox/container"
)

func TestProfiles(t *testing.T) {
	mod := func(c *testConfig) { c.Policy.MaxLimits = container.Limits{CPUs: 1} }
	strict := container.Limits{Timeout: 10 * time.Second, MemoryBytes: 256 << 20, Pids: 32, CPUs: 0.5, DiskBytes: 64 << 20, OutputBytes: 256 << 10}
	tests := []struct {
		name    string
		req     agentapi.RunRequest
		want    container.Limits
		wantErr string // substring of a 400's message
	}{
		{"none takes the defaults", agentapi.RunRequest{}, container.DefaultLimits(), ""},
		{"standard is the defaults", agentapi.RunRequest{Profile: "standard"}, container.DefaultLimits(), ""},
		{"strict", agentapi.RunRequest{Profile: "strict"}, strict, ""},
		{"request overrides the profile", agentapi.RunRequest{Profile: "strict", Limits: &agentapi.Limits{Pids: 8, TimeoutMs: 2000}},
			container.Limits{Timeout: 2 * time.Second, MemoryBytes: 256 << 20, Pids: 8, CPUs: 0.5, DiskBytes: 64 << 20, OutputBytes: 256 << 10}, ""},
		{"unknown profile", agentapi.RunRequest{Profile: "lax"}, container.Limits{}, `profile: "lax" is not a profile of this daemon; it has permissive, standard, strict`},
		{"profile above the maxima is refused", agentapi.RunRequest{Profile: "permissive"}, container.Limits{}, `limits.cpus: 2 is above the daemon's maximum 1 (request limits over profile "permissive")`},
		{"request above the maxima is refused", agentapi.RunRequest{Profile: "strict", Limits: &agentapi.Limits{CPUs: 1.5}}, container.Limits{}, "limits.cpus: 1.5 is above"},
	}
	ts := startServer(t, nil, mod)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			req := tc.req
			req.Argv = []string{"true"}
			_, err := ts.client.Run(context.Background(), &req)
			if tc.wantErr != "" {
				var ae *agentapi.Error
				if !errors.As(err, &ae) || ae.Status != http.StatusBadRequest || !strings.Contains(ae.Message, tc.wantErr) {
					t.Fatalf("err = %v, want a 400 containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := ts.runner.lastSpec(t).Limits; got != tc.want {
				t.Errorf("limits = %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestInfoListsProfiles(t *testing.T) {
	ts := startServer(t, nil, func(c *testConfig) {
		c.Policy.Profiles = []agentapi.Profile{{Name: "tiny", Limits: agentapi.Limits{MemoryBytes: 64 << 20}}, {Name: "big"}}
	})
	info, err := ts.client.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(info.Profiles) != 2 || info.Profiles[0].Name != "big" || info.Profiles[1].Name != "tiny" {
		t.Fatalf("profiles = %+v, want big and tiny, sorted", info.Profiles)
	}
	want := info.DefaultLimits
	want.MemoryBytes = 64 << 20
	if info.Profiles[1].Limits != want {
		t.Errorf("tiny's limits = %+v, want %+v (resolved over the defaults)", info.Profiles[1].Limits, want)
	}
}

func TestReconfigure(t *testing.T) {
	ts := startServer(t, nil, nil)
	ctx := context.Background()
	if err := ts.core.Reconfigure(policy.Policy{DefaultLimits: container.Limits{MemoryBytes: 1 << 30}, MaxLimits: container.Limits{MemoryBytes: 512 << 20}}); err == nil {
		t.Fatal("Reconfigure took defaults above the maxima")
	}
	if err := ts.core.Reconfigure(policy.Policy{Profiles: []agentapi.Profile{{Name: "a"}, {Name: "a"}}}); err == nil {
		t.Fatal("Reconfigure took a profile defined twice")
	}
	if err := ts.core.Reconfigure(policy.Policy{Profiles: []agentapi.Profile{{Name: "Bad Name"}}}); err == nil {
		t.Fatal("Reconfigure took a bad profile name")
	}
	if _, err := ts.client.Run(ctx, &agentapi.RunRequest{Argv: []string{"true"}}); err != nil {
		t.Fatal(err)
	}
	if got := ts.runner.lastSpec(t).Limits; got != container.DefaultLimits() {
		t.Fatalf("a refused Reconfigure changed the limits: %+v", got)
	}

	if err := ts.core.Reconfigure(policy.Policy{DefaultRootfs: "other", DefaultLimits: container.Limits{Pids: 7}, MaxLimits: container.Limits{Pids: 10},
		Profiles: []agentapi.Profile{{Name: "only"}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := ts.client.Run(ctx, &agentapi.RunRequest{Argv: []string{"true"}}); err != nil {
		t.Fatal(err)
	}
	sp := ts.runner.lastSpec(t)
	if sp.Limits.Pids != 7 || sp.RootfsDir != ts.store.dirs["other"] {
		t.Errorf("after Reconfigure: pids %d, rootfs %q; want 7 and the rootfs \"other\"", sp.Limits.Pids, sp.RootfsDir)
	}
	var ae *agentapi.Error
	if _, err := ts.client.Run(ctx, &agentapi.RunRequest{Argv: []string{"true"}, Limits: &agentapi.Limits{Pids: 11}}); !errors.As(err, &ae) || ae.Status != http.StatusBadRequest {
		t.Errorf("pids above the new maximum: err = %v, want 400", err)
	}
	if _, err := ts.client.Run(ctx, &agentapi.RunRequest{Argv: []string{"true"}, Profile: "strict"}); !errors.As(err, &ae) || !strings.Contains(ae.Message, "it has only") {
		t.Errorf("a profile removed by Reconfigure: err = %v, want 400 naming the remaining ones", err)
	}
	info, err := ts.client.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.MaxLimits.Pids != 10 || info.DefaultLimits.Pids != 7 || info.DefaultRootfs != "other" || len(info.Profiles) != 1 {
		t.Errorf("info after Reconfigure = %+v", info)
	}
}
