package registry

import (
	"net/http"

	"github.com/ardx-dev/ardx/registry/access"
	"github.com/ardx-dev/ardx/web"
)

// withCaller authenticates the Authorization header once per request and
// carries the caller in the context (access.CallerFrom). No header is an
// anonymous caller; a header that does not name a live key is 401, never an
// anonymous answer, since whoever sent it expects their own view. The key
// itself is never logged.
func (s *Service) withCaller(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := s.access.Authenticate(r.Header.Get("Authorization"))
		if err != nil {
			if !access.IsAuthError(err) {
				s.writeError(w, r, err)
				return
			}
			detail := "the key is not valid; check it, or mint a new one with POST /monitoring/start"
			code := "invalid_token"
			switch err {
			case access.ErrMalformedKey:
				detail = `the Authorization header must be "Bearer <key>" with a key this registry issued (ardx_...)`
				code = "invalid_request"
			case access.ErrRevokedKey:
				detail = "the key has been revoked (rotated); use the key that replaced it"
			}
			w.Header().Set("WWW-Authenticate", `Bearer realm="ardx", error="`+code+`"`)
			s.problems.Write(w, r, s.problems.New(web.SlugUnauthorized, detail))
			return
		}
		if c != nil {
			r = r.WithContext(access.WithCaller(r.Context(), c))
		}
		next.ServeHTTP(w, r)
	})
}

// caller is the authenticated caller of r, or nil for an anonymous one.
func (s *Service) caller(r *http.Request) *access.Caller { return access.CallerFrom(r.Context()) }

// Access returns the account store the service authenticates with, for
// wiring beside the service (commands, other components).
func (s *Service) Access() *access.Store { return s.access }

// appendViewScope appends r's view to a page-token or cache scope: the
// caller's account and the owner tags it sees. Anonymous callers append
// nothing, so their scopes are the ones issued before keys existed.
func (s *Service) appendViewScope(b []byte, r *http.Request) []byte {
	c, vs := s.caller(r), s.viewers(r)
	if c == nil && len(vs) == 0 {
		return b
	}
	b = append(b, 0, 'v')
	if c != nil {
		b = appendLenString(b, c.AccountID)
	}
	for _, v := range vs {
		b = appendLenString(b, v)
	}
	return b
}

// warnMissing logs an indexed entry that kv no longer holds (index and kv
// briefly out of step). For a caller who sees private entries the hit may
// be one being deleted, so its identifier stays out of the log.
func (s *Service) warnMissing(id string, viewers []string) {
	if len(viewers) > 0 {
		s.log.Warn("indexed entry missing from kv (identifier withheld: the search could see private entries)")
		return
	}
	s.log.Warn("indexed entry missing from kv", "identifier", id)
}
