// Package e2b serves E2B's protocol over nsbox (docs/E2B.md): the official
// E2B SDKs (`e2b`, `@e2b/code-interpreter`) drive nsbox sandboxes unchanged
// when E2B_API_URL and E2B_SANDBOX_URL point at the daemon's E2B listener.
//
// It is a second transport over the daemon's core, beside agentapi/server:
// the handlers decode E2B's wire forms, call Core and encode; every decision
// about a sandbox (limits, isolation, admission) is the core's. One TCP
// listener carries E2B's three planes:
//
//   - the control plane (REST/JSON, X-API-KEY): create, get, list, kill,
//     timeout, connect, metrics, pause and resume of sandboxes, each an
//     nsbox session (a paused one is a parked session, pause.go);
//   - envd (port 49983 in E2B): Connect-RPC process and filesystem services
//     and REST /files, /health, /envs, served by package envd once this
//     package has routed and authorized the request;
//   - the code interpreter (port 49999 in E2B): /execute and /contexts.
//
// Sandbox requests are routed by the E2b-Sandbox-Id and E2b-Sandbox-Port
// headers the SDKs send when E2B_SANDBOX_URL is set, or by a Host of the
// form PORT-ID.DOMAIN; they are authorized by the sandbox's own access
// token (the create answer's envdAccessToken), a signed URL made from it, or
// the API key that created the sandbox.
package e2b
