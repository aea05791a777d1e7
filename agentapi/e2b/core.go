package e2b

import (
	"context"
	"encoding/json"
	"net"
	"time"

	"github.com/nsbox/nsbox/agentapi"
	"github.com/nsbox/nsbox/agentapi/e2b/envd"
	"github.com/nsbox/nsbox/agentapi/e2b/snapshots"
	"github.com/nsbox/nsbox/daemon"
)

// Core is what the E2B handlers need from the daemon; *daemon.Daemon
// implements it. A sandbox's record is its session's Meta (record.go). envd.Core is envd's part: the session's process agent
// (container/procs, the one engine type this transport sees) and its
// file operations.
type Core interface {
	envd.Core
	snapshots.Core

	CreateSessionWith(ctx context.Context, req *agentapi.SessionRequest, opts daemon.SessionOptions) (*agentapi.Session, error)
	Session(ctx context.Context, id string) (*agentapi.Session, error)
	Sessions(ctx context.Context) []agentapi.Session
	SessionMeta(ctx context.Context, id string) (json.RawMessage, error)
	SetSessionMeta(ctx context.Context, id string, m json.RawMessage) error
	DeleteSession(ctx context.Context, id string) error
	ParkSession(ctx context.Context, id string) (*agentapi.Session, error)
	ReviveSession(ctx context.Context, id string) (*agentapi.CarriedSession, error)
	ForkSessionWith(ctx context.Context, id string, fo daemon.ForkOptions) (*agentapi.ForkResult, error)
	SetSessionLifetime(ctx context.Context, id string, d time.Duration) (*agentapi.Session, error)
	SessionStats(ctx context.Context, id string) (*daemon.SessionStats, error)
	Exec(ctx context.Context, id string, req *agentapi.ExecRequest, opts daemon.RunOptions) (*agentapi.RunResult, error)
	DropContext(ctx context.Context, id, context string) error
	GuestExec(ctx context.Context, id string, ref daemon.GuestRef, req *agentapi.ExecRequest, opts daemon.RunOptions) (*agentapi.RunResult, error)
	StartGuest(ctx context.Context, id string, ref daemon.GuestRef) error
	HasGuest(id, context string) bool
	DropGuest(id, context string)
	Info(ctx context.Context) (*agentapi.Info, error)
	// DialPort connects to 127.0.0.1:port in session id's sandbox
	// (getHost; agentapi/e2b/hostports).
	DialPort(ctx context.Context, id string, port int) (net.Conn, error)
}
