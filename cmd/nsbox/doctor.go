package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/nsbox/nsbox/agentapi"
	"github.com/nsbox/nsbox/container/doctor"
	"github.com/nsbox/nsbox/rootfs"
)

func doctorCommand() *cli.Command {
	return &cli.Command{
		Name:  "doctor",
		Usage: "check that this host can run nsbox sandboxes",
		Description: "Checks root, user namespaces, seccomp, the cgroup layout and controllers, CLONE_INTO_CGROUP,\n" +
			"pidfd, overlayfs, the rootfs store and the daemon socket. Exits 0 when nsbox can run here\n" +
			"(warnings allowed), 1 otherwise.",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "store", Value: rootfs.DefaultStoreRoot, Usage: "rootfs store `DIR`", EnvVars: []string{"NSBOX_ROOTFS_STORE"}},
			&cli.StringFlag{Name: "socket", Value: agentapi.DefaultSocket, Usage: "daemon socket `PATH`", EnvVars: []string{"NSBOX_SOCKET"}},
			&cli.StringSliceFlag{Name: "rootfs", Usage: "fail unless rootfs `NAME` is in the store (repeatable; e.g. a Kubernetes init container)"},
			&cli.BoolFlag{Name: "json", Usage: "print a machine-readable report"},
		},
		Action: func(c *cli.Context) error {
			facts := doctor.Gather(c.String("store"), c.String("socket"))
			facts.Required = c.StringSlice("rootfs")
			checks := doctor.Diagnose(facts)
			ok, verdict := doctor.Runnable(checks), doctor.Verdict(facts, checks)
			var err error
			if c.Bool("json") {
				err = writeDoctorJSON(c.App.Writer, checks, ok, verdict)
			} else {
				err = writeDoctorTable(c.App.Writer, checks, verdict)
			}
			if err != nil {
				return err
			}
			if !ok {
				return &exitError{code: 1, err: errors.New("doctor: " + verdict + "; see the fix lines")}
			}
			return nil
		},
	}
}

// doctorReport is the --json output.
type doctorReport struct {
	OK      bool           `json:"ok"`
	Verdict string         `json:"verdict"` // the table's last line
	Checks  []doctor.Check `json:"checks"`
}

func writeDoctorJSON(w io.Writer, checks []doctor.Check, ok bool, verdict string) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(doctorReport{OK: ok, Verdict: verdict, Checks: checks})
}

// doctorWidth is the widest the table gets: details and fixes wrap
// under the DETAIL column.
const doctorWidth = 100

// writeDoctorTable prints one row per check (CHECK, STATUS, DETAIL), the
// detail wrapped to fit doctorWidth columns and the fix, when there is
// one, on lines of its own under it, then the verdict.
func writeDoctorTable(w io.Writer, checks []doctor.Check, verdict string) error {
	nameW := len("CHECK")
	for _, c := range checks {
		nameW = max(nameW, len(c.Name))
	}
	const statusW = len("STATUS")
	indent := nameW + 2 + statusW + 2
	textW := max(doctorWidth-indent, 30)
	var b strings.Builder
	fmt.Fprintf(&b, "%-*s  %-*s  %s\n", nameW, "CHECK", statusW, "STATUS", "DETAIL")
	for _, c := range checks {
		lines := wrapText(oneLine(c.Detail), textW)
		if c.Fix != "" {
			lines = append(lines, wrapText("fix: "+oneLine(c.Fix), textW)...)
		}
		if len(lines) == 0 {
			lines = []string{""}
		}
		fmt.Fprintf(&b, "%-*s  %-*s  %s\n", nameW, c.Name, statusW, c.Status, lines[0])
		for _, l := range lines[1:] {
			fmt.Fprintf(&b, "%*s%s\n", indent, "", l)
		}
	}
	fmt.Fprintf(&b, "\n%s\n", verdict)
	_, err := io.WriteString(w, b.String())
	return err
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// wrapText breaks s into lines of at most width bytes at spaces; a word
// longer than width (a path) gets a line of its own.
func wrapText(s string, width int) []string {
	var lines []string
	line := ""
	for _, word := range strings.Fields(s) {
		switch {
		case line == "":
			line = word
		case len(line)+1+len(word) <= width:
			line += " " + word
		default:
			lines = append(lines, line)
			line = word
		}
	}
	if line != "" {
		lines = append(lines, line)
	}
	return lines
}
