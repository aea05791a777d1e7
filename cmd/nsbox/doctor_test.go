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
	}
	var table bytes.Buffer
	if err := writeDoctorTable(&table, checks, true); err != nil {
		t.Fatal(err)
	}
	out := table.String()
	for _, want := range []string{"CHECK", "STATUS", "DETAIL", "FIX", "cgroup mode", "nsbox can run here"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	if strings.Count(out, "\n") != len(checks)+3 {
		t.Errorf("table has a check over more than one line:\n%s", out)
	}
	var js bytes.Buffer
	if err := writeDoctorJSON(&js, checks, true); err != nil {
		t.Fatal(err)
	}
	var rep doctorReport
	if err := json.Unmarshal(js.Bytes(), &rep); err != nil {
		t.Fatal(err)
	}
	if !rep.OK || len(rep.Checks) != len(checks) || rep.Checks[0].Name != "root" {
		t.Errorf("JSON report = %+v", rep)
	}
}
