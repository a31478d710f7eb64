// Package access owns who may do what in the registry: accounts, their keys
// (random, shown once, stored only as SHA-256), the domains an account holds
// (proved by an ownership claim, or watched by monitoring), claims, and the
// private entries a claimed domain registers. It knows nothing of HTTP: the
// registry's handlers authenticate the Authorization header through it and
// carry the resulting Caller in the request context.
//
// Private entries are stored and indexed under an owner tag that names both
// the domain and the account holding it (OwnerTag), and a caller sees the
// tags of the domains its account holds by claim (Caller.Viewers). When a
// domain changes hands, the tag of the new holder differs from the old one,
// so nothing the old holder registered can reach the new one, even before
// the old entries are removed.
package access
