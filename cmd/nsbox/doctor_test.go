package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/nsbox/nsbox/container/doctor"
)

func TestDoctorOutput(t *testing.T) {
	checks := []doctor.Check{
		{Name: "root", Status: doctor.StatusOK, Detail: "running as root"},
		{Name: "cgroup mode", Status: doctor.StatusOK, Detail: "hybrid: v1 controllers at /sys/fs/cgroup/<ctrl>,\nempty cgroup2 at /sys/fs/cgroup/unified (v1 is used)"},
		{Name: "daemon socket", Status: doctor.StatusWarn, Detail: "/run/nsbox/nsbox.sock: no such file or directory", Fix: "start the daemon: nsbox daemon (or systemctl start nsbox)"},
		{Name: "CLONE_INTO_CGROUP", Status: doctor.StatusWarn, Detail: "clone3 with CLONE_INTO_CGROUP failed: operation not permitted; pids are moved with cgroup.procs instead, which costs a write per run and races with the child's first fork",
			Fix: "run the daemon in a cgroup v2 hierarchy it owns (systemd Delegate=yes) so that clone3 can place the init directly"},
	}
	var table bytes.Buffer
	if err := writeDoctorTable(&table, checks, "nsbox can run here"); err != nil {
		t.Fatal(err)
	}
	out := table.String()
	for _, want := range []string{"CHECK", "STATUS", "DETAIL", "fix: start the daemon", "cgroup mode", "nsbox can run here"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	// Issue 22: the table was 155 columns wide; details and fixes wrap.
	for _, l := range strings.Split(out, "\n") {
		if len(l) > doctorWidth {
			t.Errorf("line of %d columns (at most %d):\n%s", len(l), doctorWidth, l)
		}
	}
	if got := strings.Join(strings.Fields(out), " "); !strings.Contains(got, strings.Join(strings.Fields(checks[3].Detail), " ")) {
		t.Errorf("table lost the long detail:\n%s", out)
	}
	var js bytes.Buffer
	if err := writeDoctorJSON(&js, checks, true, "nsbox can run here"); err != nil {
		t.Fatal(err)
	}
	var rep doctorReport
	if err := json.Unmarshal(js.Bytes(), &rep); err != nil {
		t.Fatal(err)
	}
	if !rep.OK || rep.Verdict != "nsbox can run here" || len(rep.Checks) != len(checks) || rep.Checks[0].Name != "root" {
		t.Errorf("JSON report = %+v", rep)
	}
}
