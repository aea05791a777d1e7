package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

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
			&cli.BoolFlag{Name: "json", Usage: "print a machine-readable report"},
		},
		Action: func(c *cli.Context) error {
			checks := doctor.Diagnose(doctor.Gather(c.String("store"), c.String("socket")))
			ok := doctor.Runnable(checks)
			var err error
			if c.Bool("json") {
				err = writeDoctorJSON(c.App.Writer, checks, ok)
			} else {
				err = writeDoctorTable(c.App.Writer, checks, ok)
			}
			if err != nil {
				return err
			}
			if !ok {
				return &exitError{code: 1, err: errors.New("doctor: this host cannot run nsbox; see the FIX column")}
			}
			return nil
		},
	}
}

// doctorReport is the --json output.
type doctorReport struct {
	OK     bool           `json:"ok"`
	Checks []doctor.Check `json:"checks"`
}

func writeDoctorJSON(w io.Writer, checks []doctor.Check, ok bool) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(doctorReport{OK: ok, Checks: checks})
}

func writeDoctorTable(w io.Writer, checks []doctor.Check, ok bool) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "CHECK\tSTATUS\tDETAIL\tFIX")
	for _, c := range checks {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", c.Name, c.Status, oneLine(c.Detail), oneLine(c.Fix))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	verdict := "nsbox can run here"
	if !ok {
		verdict = "nsbox cannot run here"
	}
	_, err := fmt.Fprintln(w, "\n"+verdict)
	return err
}

func oneLine(s string) string { return strings.ReplaceAll(s, "\n", " ") }
