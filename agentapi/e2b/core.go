package e2b

import (
	"context"
	"io"
	"os"
	"time"

	"github.com/nsbox/nsbox/agentapi"
	"github.com/nsbox/nsbox/container/procs"
	"github.com/nsbox/nsbox/daemon"
)

// Core is what the E2B handlers need from the daemon; *daemon.Daemon
// implements it. Processes hands out the session's process agent, whose
// API (container/procs) is the one engine type this transport sees.
type Core interface {
	CreateSessionWith(ctx context.Context, req *agentapi.SessionRequest, opts daemon.SessionOptions) (*agentapi.Session, error)
	Session(ctx context.Context, id string) (*agentapi.Session, error)
	DeleteSession(ctx context.Context, id string) error
	ParkSession(ctx context.Context, id string) (*agentapi.Session, error)
	ReviveSession(ctx context.Context, id string) (*agentapi.CarriedSession, error)
	ForkSessionWith(ctx context.Context, id string, fo daemon.ForkOptions) (*agentapi.ForkResult, error)
	SetSessionLifetime(ctx context.Context, id string, d time.Duration) (*agentapi.Session, error)
	SessionStats(ctx context.Context, id string) (*daemon.SessionStats, error)
	Exec(ctx context.Context, id string, req *agentapi.ExecRequest, opts daemon.RunOptions) (*agentapi.RunResult, error)
	DropContext(ctx context.Context, id, context string) error
	Processes(ctx context.Context, id string) (*procs.Agent, error)

	StatFile(ctx context.Context, id, path string) (*agentapi.WorkspaceFile, error)
	ListDir(ctx context.Context, id, dir string, depth int) ([]agentapi.WorkspaceFile, error)
	MakeDir(ctx context.Context, id, path string) (created bool, err error)
	MoveFile(ctx context.Context, id, from, to string) error
	RemoveAll(ctx context.Context, id, path string) error
	OpenFile(ctx context.Context, id, path string) (*os.File, error)
	WriteFrom(ctx context.Context, id, path string, r io.Reader) (int64, error)

	Info(ctx context.Context) (*agentapi.Info, error)
}
