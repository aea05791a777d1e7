package cmdline

import (
	"github.com/urfave/cli/v2"

	"github.com/nsbox/nsbox/agentapi"
)

// NetworkFlags are the egress flags of exec and session create.
func NetworkFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringSliceFlag{Name: "allow-net", Usage: "let the sandbox reach `HOST` (pypi.org, *.pythonhosted.org, api.github.com:443) through the daemon's egress proxy; repeatable; within the daemon's [network] allow"},
		&cli.StringSliceFlag{Name: "secret", Usage: "make the daemon's secret `NAME` available: $NAME holds a placeholder the proxy swaps for the value on that secret's hosts; repeatable"},
	}
}

// ReadNetwork reads --allow-net and --secret; nil when neither is given
// (no network).
func ReadNetwork(c *cli.Context) (*agentapi.Network, error) {
	allow, secrets := c.StringSlice("allow-net"), c.StringSlice("secret")
	if len(allow) == 0 && len(secrets) == 0 {
		return nil, nil
	}
	if len(allow) == 0 {
		return nil, UsageError(c, "--secret needs --allow-net: name the hosts the sandbox may reach (the secret's among them)")
	}
	return &agentapi.Network{Allow: allow, Secrets: secrets}, nil
}
