package registry

import (
	"encoding/json"
	"net/http"
	"time"

	"github.com/julienschmidt/httprouter"

	"github.com/ardx-dev/ardx/registry/access"
	"github.com/ardx-dev/ardx/web"
)

// Monitoring terms from the contract (registry-service.md, Limits), shown
// among the free numbers.
const (
	monitoringTrialDays       = int(access.TrialLength / (24 * time.Hour))
	monitoringCreditsPerCycle = access.PeriodCredits
	monitoringCycleDays       = int(access.Period / (24 * time.Hour))
)

// freeNumbers are what anyone may do without paying, as GET /me shows them
// to every caller.
type freeNumbers struct {
	Search         freeSearch      `json:"search"`
	Agents         freePage        `json:"agents"`
	Tools          freeLimit       `json:"tools"`
	Feed           freeFeed        `json:"feed"`
	RateLimits     []freeRateLimit `json:"rateLimits"`
	Claims         freeClaims      `json:"claims"`
	PrivateEntries freePrivate     `json:"privateEntries"`
	Monitoring     freeMonitoring  `json:"monitoring"`
	// Free lists what costs nothing at all.
	Free []string `json:"free"`
}

type freeSearch struct {
	LimitDefault int      `json:"limitDefault"`
	LimitMax     int      `json:"limitMax"`
	Federation   []string `json:"federation"`
}

type freePage struct {
	PageSizeDefault int `json:"pageSizeDefault"`
	PageSizeMax     int `json:"pageSizeMax"`
}

type freeLimit struct {
	LimitMax int `json:"limitMax"`
}

type freeFeed struct {
	WindowHours int `json:"windowHours"`
	ItemsMax    int `json:"itemsMax"`
}

// freeRateLimit is one bucket: Burst requests at once, PerSecond sustained,
// counted per address (callers without a key), per account (with one) or
// per address for minted keys.
type freeRateLimit struct {
	Bucket    string  `json:"bucket"`
	Per       string  `json:"per"`
	PerSecond float64 `json:"perSecond"`
	Burst     int     `json:"burst"`
}

type freeClaims struct {
	ChallengeHours int    `json:"challengeHours"`
	DNS            string `json:"dns"`
	HTTP           string `json:"http"`
}

type freePrivate struct {
	PerDomainMax  int `json:"perDomainMax"`
	PerRequestMax int `json:"perRequestMax"`
}

type freeMonitoring struct {
	TrialDays         int    `json:"trialDays"`
	TrialPerDomain    string `json:"trialPerDomain"`
	CreditsPerCycle   int    `json:"creditsPerCycle"`
	CycleDays         int    `json:"cycleDays"`
	VerifiedOwnerRule string `json:"verifiedOwner"`
}

func (s *Service) freeNumbers() freeNumbers {
	f := freeNumbers{
		Search:     freeSearch{LimitDefault: defaultSearchLimit, LimitMax: maxSearchLimit, Federation: []string{fedAuto, fedNone, fedReferrals}},
		Agents:     freePage{PageSizeDefault: defaultAgentsPageSize, PageSizeMax: maxAgentsPageSize},
		Tools:      freeLimit{LimitMax: maxToolsLimit},
		Feed:       freeFeed{WindowHours: int(feedFreeWindow / time.Hour), ItemsMax: feedFreeItems},
		RateLimits: []freeRateLimit{},
		Claims: freeClaims{
			ChallengeHours: int(s.access.ClaimTTL() / time.Hour),
			DNS:            "TXT " + access.ChallengeDNSPrefix + "<domain> = " + access.ChallengeTXTPrefix + "<token>",
			HTTP:           "https://<domain>" + access.ChallengeFilePath + " with <token> on a line of its own",
		},
		PrivateEntries: freePrivate{PerDomainMax: access.MaxPrivatePerDomain, PerRequestMax: access.MaxPrivateEntries},
		Monitoring: freeMonitoring{
			TrialDays: monitoringTrialDays, TrialPerDomain: "once per domain",
			CreditsPerCycle: monitoringCreditsPerCycle, CycleDays: monitoringCycleDays,
			VerifiedOwnerRule: "a domain's verified owner always gets the trial",
		},
		Free: []string{
			"searching, browsing, lookups, facets, tools search, reports and publisher tools, within the rate limits",
			"the change feed's last 24 hours",
			"a key (POST /claim or POST /monitoring/start mints one), its rotation, and GET /me",
			"ownership claims and private entries for claimed domains",
			"the first 14 days of monitoring a domain",
		},
	}
	per := map[string]string{BucketAddress: "address (no key)", BucketKey: "account (with a key)", BucketMint: "address, for keys minted"}
	for _, b := range s.cfg.RateLimits {
		f.RateLimits = append(f.RateLimits, freeRateLimit{Bucket: b.Name, Per: per[b.Name], PerSecond: b.Rate, Burst: b.Burst})
	}
	return f
}

// meResponse is the body of GET /me. Account members are absent for a
// caller without a key.
type meResponse struct {
	Authenticated bool        `json:"authenticated"`
	Free          freeNumbers `json:"free"`
	HowToGetAKey  string      `json:"howToGetAKey,omitempty"`

	Account        *meAccount       `json:"account,omitempty"`
	Key            *access.KeyInfo  `json:"key,omitempty"`
	Keys           []access.KeyInfo `json:"keys,omitzero"`
	Domains        []meDomain       `json:"domains,omitzero"`
	PrivateEntries []mePrivateCount `json:"privateEntries,omitzero"`
	Usage          *meUsage         `json:"usage,omitempty"`
	More           map[string]any   `json:"-"`
}

type meAccount struct {
	ID        string    `json:"id"`
	CreatedAt time.Time `json:"createdAt"`
}

// meDomain is one domain the account holds and how: "claim" (ownership
// proved) or "monitoring" (watched; gives no access to private entries).
type meDomain struct {
	Domain string    `json:"domain"`
	Via    string    `json:"via"`
	Since  time.Time `json:"since"`
}

type mePrivateCount struct {
	Domain string `json:"domain"`
	Count  int    `json:"count"`
}

// meUsage counts the account's requests per metered route today (UTC).
type meUsage struct {
	Day    string       `json:"day"`
	Routes []routeUsage `json:"routes"`
	Note   string       `json:"note"`
}

// mePart adds one member to an authenticated caller's GET /me (monitoring,
// credits...): the member's name and value. Parts are listed in
// Service.meParts.
type mePart func(r *http.Request, c *access.Caller) (name string, value any, err error)

// handleMe handles "GET /me": the free numbers for everyone; with a key,
// the account too: its keys, the domains it holds and how, its private
// entries per domain, and today's requests per route.
func (s *Service) handleMe(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	if !s.noParams(w, r) {
		return
	}
	w.Header().Set("Cache-Control", "private, no-store")
	resp := meResponse{Free: s.freeNumbers()}
	c := s.caller(r)
	if c == nil {
		resp.HowToGetAKey = "POST /claim (to prove a domain is yours) or POST /monitoring/start (to watch one) mints a key for a caller without one"
		web.WriteJSON(w, http.StatusOK, resp)
		return
	}
	a, err := s.access.Account(c.AccountID)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	keys, err := s.access.Keys(c.AccountID)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	resp.Authenticated = true
	resp.Account = &meAccount{ID: a.ID, CreatedAt: a.CreatedAt}
	resp.Keys = keys
	for i := range keys {
		if keys[i].ID == c.KeyID {
			resp.Key = &keys[i]
		}
	}
	holdings, err := s.access.Domains(c.AccountID)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	resp.Domains = []meDomain{}
	resp.PrivateEntries = []mePrivateCount{}
	for _, h := range holdings {
		resp.Domains = append(resp.Domains, meDomain{Domain: h.Domain, Via: h.Via, Since: h.Since})
	}
	entries, err := s.access.PrivateEntries(c)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	counts := map[string]int{}
	for _, e := range entries {
		counts[access.DomainOfOwner(e.Owner)]++
	}
	for _, d := range c.Claimed {
		resp.PrivateEntries = append(resp.PrivateEntries, mePrivateCount{Domain: d, Count: counts[d]})
	}
	day, routes := s.usage.of(c.AccountID, s.cfg.Now())
	resp.Usage = &meUsage{Day: day, Routes: routes, Note: "requests made with this account's keys today (UTC), per route, counted since the service started"}
	if len(s.meParts) == 0 {
		web.WriteJSON(w, http.StatusOK, resp)
		return
	}
	out := map[string]any{}
	for _, part := range s.meParts {
		name, v, err := part(r, c)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		out[name] = v
	}
	web.WriteJSON(w, http.StatusOK, mergeMembers(resp, out))
}

// keyRotateResponse is the body of POST /keys/rotate.
type keyRotateResponse struct {
	Key       mintedKey `json:"key"`
	Account   string    `json:"account"`
	RevokedID string    `json:"revoked"`
}

// handleKeyRotate handles "POST /keys/rotate": the key the request was
// sent with is revoked and a new key of the same account is returned, once.
// The account keeps its domains, private entries, monitoring and credits.
func (s *Service) handleKeyRotate(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	if r.ContentLength != 0 {
		if _, err := readObject(w, r, s.problems); err != nil {
			s.writeError(w, r, err)
			return
		}
	}
	c, ok := s.requireCaller(w, r, "rotating a key needs that key")
	if !ok {
		return
	}
	key, err := s.access.RotateKey(c)
	if err != nil {
		if access.IsAuthError(err) {
			w.Header().Set("WWW-Authenticate", `Bearer realm="ardx", error="invalid_token"`)
			s.problems.Write(w, r, s.problems.New(web.SlugUnauthorized, "the key has been revoked (rotated); use the key that replaced it"))
			return
		}
		s.writeError(w, r, err)
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	web.WriteJSON(w, http.StatusOK, keyRotateResponse{Key: mintedKey{Key: key, ID: keyID(key), Note: mintedKeyNote}, Account: c.AccountID, RevokedID: c.KeyID})
}

// mergeMembers renders resp with the members of more added.
func mergeMembers(resp meResponse, more map[string]any) map[string]json.RawMessage {
	raw, _ := json.Marshal(resp)
	var out map[string]json.RawMessage
	_ = json.Unmarshal(raw, &out)
	for k, v := range more {
		b, err := json.Marshal(v)
		if err == nil {
			out[k] = b
		}
	}
	return out
}
