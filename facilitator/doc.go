// Package facilitator owns the x402 payment facilitator's HTTP surface: the
// routes of the service (one routes() lists every method and path), the
// handlers of /verify, /settle, /supported and /health, the mapping of every
// failure to either the x402 payment response shapes (on POST /verify and
// POST /settle) or RFC 9457 problems (everywhere else), the per-client rate
// limit buckets, and the client side of `ardx pay`.
//
// Verification and exactly-once settlement live in facilitator/settle, wire
// types in facilitator/x402, chains in facilitator/evm and address screening
// in facilitator/screen; this package wires them to HTTP and decides nothing
// about payments itself.
package facilitator
