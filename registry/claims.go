package registry

import (
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/julienschmidt/httprouter"

	"github.com/ardx-dev/ardx/registry/access"
	"github.com/ardx-dev/ardx/web"
)

// claimResponse is the body of POST /claim: the token and where to put it.
type claimResponse struct {
	Domain    string     `json:"domain"`
	Token     string     `json:"token"`
	ExpiresAt time.Time  `json:"expiresAt"`
	DNS       claimDNS   `json:"dns"`
	HTTP      claimFile  `json:"http"`
	Verify    string     `json:"verify"`
	Key       *mintedKey `json:"key,omitempty"` // only when this request minted the caller's key
	Account   string     `json:"account"`
	Note      string     `json:"note"`
}

type claimDNS struct {
	Name  string `json:"name"`
	Type  string `json:"type"`
	Value string `json:"value"`
}

type claimFile struct {
	URL  string `json:"url"`
	Body string `json:"body"`
}

// mintedKey is a key shown once, in the answer of the request that minted it.
type mintedKey struct {
	Key  string `json:"key"`
	ID   string `json:"id"`
	Note string `json:"note"`
}

const mintedKeyNote = "shown once: this registry keeps only its hash. Send it as Authorization: Bearer <key>."

// handleClaim handles "POST /claim": begins proving ownership of a domain.
// A caller without a key gets one minted here (rate limited per address),
// since a claim needs an account to belong to.
func (s *Service) handleClaim(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	m, err := readObject(w, r, s.problems)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	var fe fieldErrors
	fe.onlyMembers(m, "", "a claim request", "domain")
	domain := domainMember(m, &fe)
	if p := fe.problem(s.problems); p != nil {
		s.writeError(w, r, p)
		return
	}
	c := s.caller(r)
	var minted *mintedKey
	if c == nil {
		if !s.allowMint(w, r) {
			return
		}
		acct, key, err := s.access.CreateAccount()
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		c = &access.Caller{AccountID: acct.ID}
		minted = &mintedKey{Key: key, ID: keyID(key), Note: mintedKeyNote}
	}
	ch, err := s.access.StartClaim(c.AccountID, domain)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	web.WriteJSON(w, http.StatusOK, claimResponse{
		Domain: ch.Domain, Token: ch.Token, ExpiresAt: ch.ExpiresAt,
		DNS:     claimDNS{Name: ch.DNSName, Type: "TXT", Value: ch.TXTValue},
		HTTP:    claimFile{URL: ch.FileURL, Body: ch.Token},
		Verify:  "POST /claim/verify with {\"domain\":\"" + ch.Domain + "\"} and this account's key, once either proof is in place",
		Key:     minted,
		Account: c.AccountID,
		Note:    "Put the TXT record or the file in place, then verify before expiresAt. A domain claimed by another account moves to this one when verified; the other account loses it and its private entries of it.",
	})
}

// keyID is the public id inside a key (ardx_<id>_<secret>).
func keyID(key string) string {
	if len(key) > 21 {
		return key[5:21]
	}
	return ""
}

// claimVerifyResponse is the body of POST /claim/verify.
type claimVerifyResponse struct {
	Domain      string `json:"domain"`
	Verified    bool   `json:"verified"`
	Method      string `json:"method"`
	Via         string `json:"via"`
	Transferred bool   `json:"transferred"` // the domain was held by another account until now
}

// handleClaimVerify handles "POST /claim/verify": completes the ownership
// proof by the DNS record, the file, or whichever is found ("method"
// absent).
func (s *Service) handleClaimVerify(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	m, err := readObject(w, r, s.problems)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	var fe fieldErrors
	fe.onlyMembers(m, "", "a claim verification", "domain", "method")
	domain := domainMember(m, &fe)
	var methods []string
	if raw, ok := m["method"]; ok && !isNull(raw) {
		v, ok := rawString(raw)
		if !ok || v != access.MethodDNS && v != access.MethodHTTP {
			fe.add("method", "must be dns or http (absent: both are tried)")
		} else {
			methods = []string{v}
		}
	}
	if p := fe.problem(s.problems); p != nil {
		s.writeError(w, r, p)
		return
	}
	c, ok := s.requireCaller(w, r, "verifying a claim needs the key of the account that started it")
	if !ok {
		return
	}
	res, err := s.access.VerifyClaim(r.Context(), c.AccountID, domain, methods)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if len(res.Removed) > 0 {
		ids := make([]string, len(res.Removed))
		for i, e := range res.Removed {
			ids[i] = e.ID
		}
		if err := s.ix.Delete(ids); err != nil {
			// kv no longer holds them and results are filtered by owner,
			// so nobody sees them; reindex clears the stale docs.
			s.log.Error("claim transfer: removing the previous holder's private entries from the index failed; run reindex", "err", err)
		}
	}
	w.Header().Set("Cache-Control", "no-store")
	web.WriteJSON(w, http.StatusOK, claimVerifyResponse{Domain: res.Domain, Verified: true, Method: res.Method, Via: access.ViaClaim, Transferred: res.Transferred})
}

// requireCaller returns r's caller, or answers 401 (with why) for an
// anonymous one.
func (s *Service) requireCaller(w http.ResponseWriter, r *http.Request, why string) (*access.Caller, bool) {
	c := s.caller(r)
	if c == nil {
		w.Header().Set("WWW-Authenticate", `Bearer realm="ardx"`)
		s.problems.Write(w, r, s.problems.New(web.SlugUnauthorized, why+": send Authorization: Bearer <key> (POST /claim or POST /monitoring/start mints one)"))
		return nil, false
	}
	return c, true
}

// accessProblem maps the access package's errors to problems; ok is false
// for an error it does not know.
func (s *Service) accessProblem(err error) (*web.Problem, bool) {
	var notProved *access.NotProvedError
	var invalid *access.InvalidEntriesError
	switch {
	case errors.As(err, &notProved):
		return s.problems.New(web.SlugForbidden, "ownership not proved: "+strings.Join(notProved.Reasons, "; ")), true
	case errors.As(err, &invalid):
		fes := make([]web.FieldError, len(invalid.Errors))
		for i, e := range invalid.Errors {
			fes[i] = web.FieldError{Field: e.Field, Message: e.Message}
		}
		return s.problems.Invalid("the private entries are not valid; nothing was stored", fes...), true
	case errors.Is(err, access.ErrNoChallenge), errors.Is(err, access.ErrChallengeExpired):
		return s.problems.New(web.SlugConflict, strings.TrimPrefix(err.Error(), "access: ")), true
	case errors.Is(err, access.ErrNotHeld):
		return s.problems.New(web.SlugForbidden, strings.TrimPrefix(err.Error(), "access: ")), true
	case errors.Is(err, access.ErrTooManyPrivate):
		return s.problems.New(web.SlugConflict, strings.TrimPrefix(err.Error(), "access: ")), true
	}
	return nil, false
}
