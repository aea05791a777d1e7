package integration

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/nsbox/nsbox/agentapi"
)

// TestProfiles: a strict run that allocates 300 MiB is killed (strict has
// 256 MiB) while the same code passes under standard; an explicit limit
// overrides the profile; an unknown profile is a 400 naming it; /v1/info
// lists the built-ins.
func TestProfiles(t *testing.T) {
	d := startDaemon(t)
	ctx := context.Background()
	alloc := `b = b"x" * (300 << 20); print(len(b) >> 20)`

	res, err := d.client.Run(ctx, &agentapi.RunRequest{Language: agentapi.LanguagePython, Code: alloc, Profile: agentapi.ProfileStrict})
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != agentapi.StatusOOM {
		t.Errorf("strict, 300 MiB: status %q (stderr %q), want oom", res.Status, res.Stderr)
	}
	res, err = d.client.Run(ctx, &agentapi.RunRequest{Language: agentapi.LanguagePython, Code: alloc, Profile: agentapi.ProfileStandard})
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != agentapi.StatusOK || res.Stdout != "300\n" {
		t.Errorf("standard, 300 MiB: %+v, want ok", res)
	}
	res, err = d.client.Run(ctx, &agentapi.RunRequest{Language: agentapi.LanguagePython, Code: alloc, Profile: agentapi.ProfileStrict,
		Limits: &agentapi.Limits{MemoryBytes: 512 << 20}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != agentapi.StatusOK {
		t.Errorf("strict with memory_bytes 512 MiB: status %q, want ok (the request overrides the profile)", res.Status)
	}

	_, err = d.client.Run(ctx, &agentapi.RunRequest{Argv: []string{"true"}, Profile: "paranoid"})
	var ae *agentapi.Error
	if !errors.As(err, &ae) || ae.Status != http.StatusBadRequest || !strings.Contains(ae.Message, `"paranoid"`) || !strings.HasPrefix(ae.Message, "profile:") {
		t.Errorf("unknown profile: err = %v, want a 400 on field profile naming it", err)
	}

	info, err := d.client.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"permissive", "standard", "strict"} {
		if !hasProfile(info.Profiles, name) {
			t.Errorf("/v1/info lacks profile %q: %+v", name, info.Profiles)
		}
	}
	d.waitIdle(t)
	d.assertClean(t, res.ID)
}
