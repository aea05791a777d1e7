package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/signal"
	"strconv"
	"syscall"

	"github.com/urfave/cli/v2"

	"github.com/nsbox/nsbox/cmd/nsbox/internal/cmdline"
	"github.com/nsbox/nsbox/cmd/nsbox/internal/portfwd"
)

func sessionPortCommand() *cli.Command {
	return &cli.Command{
		Name:      "port",
		Usage:     "forward a local TCP port to a server the session runs on its 127.0.0.1:PORT (until Ctrl-C)",
		ArgsUsage: "ID PORT",
		Flags: []cli.Flag{socketFlag(), &cli.StringFlag{Name: "listen", Usage: "listen on `ADDR`, a loopback address (127.0.0.1:0: any free port)",
			DefaultText: "127.0.0.1:PORT"}},
		Action: sessionPort,
	}
}

// sessionPort is `nsbox session port ID PORT`.
func sessionPort(c *cli.Context) error {
	if c.NArg() != 2 {
		return cmdline.UsageError(c, "usage: nsbox session port ID PORT [--listen 127.0.0.1:N]")
	}
	id := c.Args().Get(0)
	port, err := strconv.Atoi(c.Args().Get(1))
	if err != nil || port < 1 || port > 65535 {
		return cmdline.UsageError(c, "PORT %q is not a TCP port (1 to 65535)", c.Args().Get(1))
	}
	cl := sessionClient(c)
	if _, err := cl.Session(c.Context, id); err != nil {
		return err
	}
	addr := c.String("listen")
	if addr == "" {
		addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	}
	ln, err := portfwd.Listen(addr)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(c.Context, os.Interrupt, syscall.SIGTERM)
	defer stop()
	fmt.Fprintf(c.App.Writer, "forwarding %s to port %d of session %s (Ctrl-C to stop)\n", ln.Addr(), port, id)
	return portfwd.Serve(ctx, ln, func(ctx context.Context) (net.Conn, error) { return cl.DialPort(ctx, id, port) }, c.App.ErrWriter)
}
