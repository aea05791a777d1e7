package bench

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/nsbox/nsbox/agentapi"
	"github.com/nsbox/nsbox/agentapi/client"
	"github.com/nsbox/nsbox/container"
	"github.com/nsbox/nsbox/rootfs"
	"github.com/nsbox/nsbox/scripts/bench/benchd"
	"github.com/nsbox/nsbox/scripts/bench/interrupt"
	"github.com/nsbox/nsbox/scripts/bench/measure"
	"github.com/nsbox/nsbox/scripts/bench/peer"
)

// The node part measures JavaScript beside Python, on the data-science
// rootfs "default" (the one with Node.js): `node -e 'console.log(1)'` in
// the engine cold against bwrap running the same, then through a private
// daemon console.log(1) pooled and cold and a session round trip, next to
// the same Python requests on the same daemon, in alternating rounds.

func benchNode(ctx context.Context, o Options, rep *report) error {
	rfs, err := rootfs.Store{Root: o.Store}.Lookup("default")
	if err != nil || !hasFile(rfs.Dir, "usr/bin/node") {
		rep.Skipped = append(rep.Skipped, "node: no rootfs \"default\" with Node.js (make rootfs-default)")
		return nil
	}
	release, err := rfs.Acquire()
	if err != nil {
		return err
	}
	defer release()
	before := measure.LoadAvg()
	defer func() { rep.NodeLoad = before + " -> " + measure.LoadAvg() }()
	rounds := max(1, o.Runs/4) // node starts in ~130 ms: a quarter of the engine's rounds

	// The engine, cold, against bwrap: the same node -e on the same tree.
	argv := []string{"node", "-e", "console.log(1)"}
	eng, err := container.New(container.Config{CgroupName: interrupt.Name()})
	if err != nil {
		return err
	}
	defer eng.Close()
	var engine, bwrap []time.Duration
	_, bwrapErr := exec.LookPath("bwrap")
	for range rounds {
		t0 := time.Now()
		res, err := eng.Run(ctx, container.Spec{RootfsDir: rfs.Dir, Argv: argv})
		if err != nil || res.Status != container.StatusOK {
			return fmt.Errorf("node in the engine: %v %+v", err, res)
		}
		engine = append(engine, time.Since(t0))
		if bwrapErr == nil {
			t0 = time.Now()
			if err := peer.Quiet(peer.Bwrap(ctx, rfs.Dir, argv)); err != nil {
				return fmt.Errorf("node under bwrap: %w", err)
			}
			bwrap = append(bwrap, time.Since(t0))
		}
	}
	rep.Node = append(rep.Node, compare("engine cold: node -e 'console.log(1)'", engine, "bwrap", bwrap, "<= 1.2x bwrap"))
	if bwrapErr == nil {
		rep.Node = append(rep.Node, compare("bwrap --unshare-all: node -e 'console.log(1)'", bwrap, "", nil, ""))
	} else {
		rep.Skipped = append(rep.Skipped, "node: bwrap not installed (apt-get install bubblewrap)")
	}

	// Through private daemons: one with the warm pools (Python's and the
	// Node one), one with none for the cold rows.
	if o.Socket != "" {
		rep.Skipped = append(rep.Skipped, "node through the daemon: needs private daemons (not --socket)")
		return nil
	}
	nsbox, err := o.nsbox()
	if err != nil {
		return err
	}
	warm, err := benchd.Start(nsbox, o.Store, "default", "", "--pool-size", "1", "--pool-node-size", "1")
	if err != nil {
		return err
	}
	defer warm.Close()
	cold, err := benchd.Start(nsbox, o.Store, "default", "", "--pool-size", "0", "--pool-node-size", "0", "--zygote=false")
	if err != nil {
		return err
	}
	defer cold.Close()
	runOnce := func(cl *client.Client, lang, code string, wantPooled bool) (time.Duration, error) {
		t0 := time.Now()
		res, err := cl.Run(ctx, &agentapi.RunRequest{Language: lang, Code: code})
		el := time.Since(t0)
		switch {
		case err != nil:
			return 0, err
		case res.Status != agentapi.StatusOK:
			return 0, fmt.Errorf("%s: %s %s", lang, res.Status, res.Error)
		case wantPooled && !res.Pooled:
			return 0, fmt.Errorf("%s: the run found no warm runner", lang)
		}
		return el, nil
	}
	sessionRTT := func(cl *client.Client, lang string, n int) ([]time.Duration, error) {
		s, err := cl.CreateSession(ctx, &agentapi.SessionRequest{Language: lang})
		if err != nil {
			return nil, err
		}
		defer cl.DeleteSession(ctx, s.ID)
		init := "x = 0"
		if lang == agentapi.LanguageJavaScript {
			init = "let x = 0"
		}
		if _, err := cl.Exec(ctx, s.ID, &agentapi.ExecRequest{Code: init}); err != nil {
			return nil, err
		}
		var out []time.Duration
		for range n {
			t0 := time.Now()
			res, err := cl.Exec(ctx, s.ID, &agentapi.ExecRequest{Code: "x += 1"})
			if err != nil {
				return nil, err
			}
			if res.Status != agentapi.StatusOK {
				return nil, fmt.Errorf("%s session exec: %s %s", lang, res.Status, res.Error)
			}
			out = append(out, time.Since(t0))
		}
		return out, nil
	}
	var jsPooled, pyPooled, jsCold, pyCold, jsSession, pySession []time.Duration
	for range rounds {
		for _, c := range []struct {
			lang, code string
			dst        *[]time.Duration
		}{{agentapi.LanguageJavaScript, "console.log(1)", &jsPooled}, {agentapi.LanguagePython, "print(1)", &pyPooled}} {
			if err := warm.WaitPools(ctx); err != nil {
				return err
			}
			el, err := runOnce(warm.Client, c.lang, c.code, true)
			if err != nil {
				return fmt.Errorf("pooled: %w", err)
			}
			*c.dst = append(*c.dst, el)
		}
		for _, c := range []struct {
			lang, code string
			dst        *[]time.Duration
		}{{agentapi.LanguageJavaScript, "console.log(1)", &jsCold}, {agentapi.LanguagePython, "print(1)", &pyCold}} {
			el, err := runOnce(cold.Client, c.lang, c.code, false)
			if err != nil {
				return fmt.Errorf("cold: %w", err)
			}
			*c.dst = append(*c.dst, el)
		}
	}
	for _, c := range []struct {
		lang string
		dst  *[]time.Duration
	}{{agentapi.LanguageJavaScript, &jsSession}, {agentapi.LanguagePython, &pySession}} {
		s, err := sessionRTT(warm.Client, c.lang, 10*rounds)
		if err != nil {
			return fmt.Errorf("session: %w", err)
		}
		*c.dst = s
	}
	rep.Node = append(rep.Node,
		compare("daemon, pooled: console.log(1)", jsPooled, "python", pyPooled, "<= 3 ms"),
		compare("daemon, pooled: print(1)", pyPooled, "", nil, ""),
		compare("daemon, cold: console.log(1)", jsCold, "python", pyCold, ""),
		compare("daemon, cold: print(1)", pyCold, "", nil, ""),
		compare("session exec x += 1 (javascript)", jsSession, "python", pySession, "<= 2 ms"),
		compare("session exec x += 1 (python)", pySession, "", nil, ""),
	)
	return nil
}

// hasFile reports whether rel exists in the tree at dir.
func hasFile(dir, rel string) bool {
	_, err := os.Lstat(filepath.Join(dir, rel))
	return err == nil
}
