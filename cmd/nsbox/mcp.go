package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/urfave/cli/v2"

	"github.com/nsbox/nsbox/agentapi"
	"github.com/nsbox/nsbox/agentapi/client"
	"github.com/nsbox/nsbox/agentapi/limits"
	"github.com/nsbox/nsbox/agentapi/mcp"
	"github.com/nsbox/nsbox/cmd/nsbox/internal/cmdline"
	"github.com/nsbox/nsbox/daemon/lang"
)

func mcpCommand() *cli.Command {
	return &cli.Command{
		Name:  "mcp",
		Usage: "serve run_python, run_shell, run_javascript and file tools to an MCP client on stdio (Claude Desktop, IDE agents)",
		Description: "Speaks the Model Context Protocol on stdin/stdout and runs every tool call in the nsbox daemon.\n" +
			"Each MCP connection gets one session (state persists like a notebook), deleted when the connection ends.\n" +
			"Logs go to stderr. Client configuration: {\"mcpServers\": {\"nsbox\": {\"command\": \"/usr/local/bin/nsbox\", \"args\": [\"mcp\"]}}}",
		ArgsUsage: " ",
		Flags: append([]cli.Flag{
			socketFlag(),
			&cli.StringFlag{Name: "rootfs", Usage: "rootfs `NAME` of the sandboxes", DefaultText: "the daemon's"},
			&cli.StringFlag{Name: "session-mode", Value: mcp.SessionPerConnection, Usage: "`MODE` per-connection (one persistent session per MCP client) or per-call (a fresh sandbox per call)"},
			&cli.DurationFlag{Name: "idle-timeout", Usage: "end an unused session after `DURATION`", DefaultText: "the daemon's"},
			&cli.StringSliceFlag{Name: "allow-net", Usage: "let every sandbox reach `HOST` through the daemon's egress proxy (repeatable; within the daemon's [network] allow); the model cannot change it"},
			&cli.StringSliceFlag{Name: "secret", Usage: "give every sandbox the daemon's secret `NAME` (as a placeholder; repeatable)"},
			&cli.StringFlag{Name: "log-level", Value: "info", Usage: "log `LEVEL`: debug, info, warn or error (logs go to stderr)"},
		}, append(mcpLimitFlags(), cmdline.MountFlags()...)...),
		Action: mcpServe,
	}
}

// mcpOutput is what the model reads of a stream unless --output says.
const mcpOutput = "128K"

// mcpLimitFlags are the limit flags of `nsbox mcp`, from the limits table.
func mcpLimitFlags() []cli.Flag {
	flags := cmdline.TableFlags(func(r limits.Row) (string, string) {
		switch r.Key {
		case "timeout":
			return "default timeout of one tool call", "the daemon's"
		case "output":
			return "output kept per stream and call (what the model reads)", mcpOutput
		}
		return r.Usage, "the daemon's"
	})
	for _, f := range flags {
		if sf, ok := f.(*cli.StringFlag); ok && sf.Name == "output" {
			sf.Value, sf.DefaultText = mcpOutput, ""
		}
	}
	return flags
}

// mcpLimits reads the limit flags of `nsbox mcp`, checked as exec's are.
func mcpLimits(c *cli.Context) (agentapi.Limits, error) {
	l, err := cmdline.ReadLimits(c)
	return limits.ToWire(l), err
}

func mcpServe(c *cli.Context) error {
	var level slog.Level
	if err := level.UnmarshalText([]byte(c.String("log-level"))); err != nil {
		return cmdline.UsageError(c, "--log-level: %v", err)
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	lim, err := mcpLimits(c)
	if err != nil {
		return err
	}
	network, err := cmdline.ReadNetwork(c)
	if err != nil {
		return err
	}
	volumes, datasets, err := cmdline.ReadMounts(c)
	if err != nil {
		return err
	}
	cl := &client.Client{Socket: c.String("socket")}
	ctx, stop := signal.NotifyContext(c.Context, os.Interrupt, syscall.SIGTERM)
	defer stop()
	// The tool descriptions tell the model its rootfs and limits as the
	// daemon reports them now.
	hctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	info, err := cl.Info(hctx)
	cancel()
	if err != nil {
		// Serve anyway: tool calls report the problem to the model, and
		// work as soon as the daemon is up.
		log.Warn("the nsbox daemon does not answer; tool calls fail until it does", "err", err)
		info = nil
	}
	srv, err := mcp.New(mcp.Config{
		Client:      cl,
		Rootfs:      c.String("rootfs"),
		Limits:      lim,
		IdleTimeout: c.Duration("idle-timeout"),
		SessionMode: c.String("session-mode"),
		Version:     version,
		Logger:      log,
		Info:        info,
		Languages:   lang.BuiltinInfo(),
		Network:     network,
		Volumes:     volumes,
		Datasets:    datasets,
	})
	if err != nil {
		return fmt.Errorf("--session-mode: %w", err)
	}
	log.Info("serving MCP on stdio", "socket", c.String("socket"), "session_mode", c.String("session-mode"))
	return srv.Run(ctx, &mcpsdk.StdioTransport{})
}
