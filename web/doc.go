// Package web is the HTTP toolkit shared by ardx's services. It is not a
// service itself: it owns decoding and validating JSON requests, RFC 9457
// problem documents, body limits, per-client rate limits with RateLimit
// headers, content negotiation, listener lifecycle, and the SSRF-safe client
// used for every outbound fetch of a publisher's domain.
//
// It imports nothing of ardx's own packages.
package web
