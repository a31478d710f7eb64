package registry

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"time"

	"github.com/julienschmidt/httprouter"

	"github.com/ardx-dev/ardx/kv"
	"github.com/ardx-dev/ardx/registry/access"
	"github.com/ardx-dev/ardx/web"
)

// initMonitoring builds the monitoring, credits and alert components and
// starts their background loop (charges, alert outbox) unless
// MonitorInterval is negative.
func (s *Service) initMonitoring() error {
	s.monitor = &access.Monitor{DB: s.db, Now: s.cfg.Now}
	f := s.cfg.WebhookFetcher
	if f == nil {
		f = web.NewFetcher(web.FetchOptions{MaxRedirects: -1, Timeout: 10 * time.Second, MaxBytes: 64 << 10})
	}
	s.alerts = &access.Alerts{DB: s.db, Fetcher: f, Now: s.cfg.Now, Logger: s.log}
	if err := s.SetPayments(s.cfg.Payments); err != nil {
		return err
	}
	s.meParts = append(s.meParts,
		func(_ *http.Request, c *access.Caller) (string, any, error) {
			mine, err := s.monitor.Mine(c.AccountID)
			return "monitoring", mine, err
		},
		func(_ *http.Request, c *access.Caller) (string, any, error) {
			v, err := s.creditsOf(c.AccountID)
			return "credits", v, err
		})
	s.stopMonitor = func(context.Context) error { return nil }
	interval := s.cfg.MonitorInterval
	if interval < 0 {
		return nil
	}
	if interval == 0 {
		interval = 10 * time.Second
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			if err := s.RunMonitoring(ctx); err != nil && ctx.Err() == nil {
				s.log.Warn("monitoring run failed", "error", err)
			}
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	s.stopMonitor = func(stop context.Context) error {
		cancel()
		done := make(chan struct{})
		go func() { wg.Wait(); close(done) }()
		select {
		case <-done:
			return nil
		case <-stop.Done():
			return stop.Err()
		}
	}
	return nil
}

// RunMonitoring does one round of the monitoring loop: credit purchases
// whose buyer never got a final answer (resuming that account's paused
// monitorings), charge periods that ended (pausing what the balance cannot
// pay), turn new feed events of monitored domains into alerts, and deliver
// the alerts due.
func (s *Service) RunMonitoring(ctx context.Context) error {
	if c := s.credits.Load(); c != nil {
		credited, err := c.Reconcile(ctx)
		if err != nil {
			s.log.Warn("reconcile credit purchases", "error", err)
		}
		for _, account := range credited {
			if err := s.monitor.ResumeAccount(account); err != nil {
				return err
			}
		}
	}
	if _, _, err := s.monitor.Sweep(); err != nil {
		return err
	}
	if _, err := s.alerts.Enqueue(); err != nil {
		return err
	}
	_, err := s.alerts.Deliver(ctx)
	return err
}

// monitoringStartResponse is the body of POST /monitoring/start.
type monitoringStartResponse struct {
	// Key is set only when this call minted the caller's key: shown once.
	Key     *mintedKey `json:"key,omitempty"`
	Account string     `json:"account"`
	access.StartResult
	Credits int64 `json:"creditsBalance"`
}

// handleMonitoringStart handles "POST /monitoring/start": {domain,
// webhook?}. A caller without a key gets one, minted here and shown once.
func (s *Service) handleMonitoringStart(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	domain, webhook, ok := s.readMonitoringBody(w, r, true)
	if !ok {
		return
	}
	c := s.caller(r)
	var resp monitoringStartResponse
	account := ""
	verified := false
	if c != nil {
		account, verified = c.AccountID, c.HoldsByClaim(domain)
	} else {
		if !s.allowMint(w, r) {
			return
		}
		acct, key, err := s.access.CreateAccount()
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		account = acct.ID
		resp.Key = &mintedKey{Key: key, ID: keyID(key), Note: mintedKeyNote}
	}
	res, err := s.monitor.Start(account, domain, verified, webhook)
	if errors.Is(err, access.ErrBadWebhook) {
		s.problems.Write(w, r, s.problems.Invalid(err.Error(), web.FieldError{Field: "webhook", Message: "must be an absolute http(s) URL without credentials"}))
		return
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if _, err := s.access.HoldDomain(account, domain, access.ViaMonitoring); err != nil {
		s.writeError(w, r, err)
		return
	}
	resp.Account, resp.StartResult = account, res
	if resp.Credits, err = s.db.CreditBalance(account); err != nil {
		s.writeError(w, r, err)
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	web.WriteJSON(w, http.StatusOK, resp)
}

// handleMonitoringStop handles "POST /monitoring/stop": {domain}.
func (s *Service) handleMonitoringStop(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	domain, _, ok := s.readMonitoringBody(w, r, false)
	if !ok {
		return
	}
	c, ok := s.requireCaller(w, r, "POST /monitoring/stop needs the key that started the monitoring")
	if !ok {
		return
	}
	v, err := s.monitor.Stop(c.AccountID, domain)
	if errors.Is(err, access.ErrNotMonitored) {
		s.problems.Write(w, r, s.problems.New(web.SlugNotFound, "this account does not monitor "+domain))
		return
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if _, err := s.access.ReleaseDomain(c.AccountID, domain, access.ViaMonitoring); err != nil {
		s.writeError(w, r, err)
		return
	}
	web.WriteJSON(w, http.StatusOK, map[string]any{"monitoring": v})
}

// handleMonitoringMine handles "GET /monitoring/mine".
func (s *Service) handleMonitoringMine(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	var fe fieldErrors
	fe.onlyParams(r.URL.Query(), "GET /monitoring/mine")
	if p := fe.problem(s.problems); p != nil {
		s.problems.Write(w, r, p)
		return
	}
	c, ok := s.requireCaller(w, r, "GET /monitoring/mine lists a key's monitoring")
	if !ok {
		return
	}
	mine, err := s.monitor.Mine(c.AccountID)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	web.WriteJSON(w, http.StatusOK, map[string]any{"items": mine})
}

// readMonitoringBody reads {domain, webhook?} (webhook only when allowed).
func (s *Service) readMonitoringBody(w http.ResponseWriter, r *http.Request, webhookAllowed bool) (domain, webhook string, ok bool) {
	m, err := readObject(w, r, s.problems)
	if err != nil {
		s.writeError(w, r, err)
		return "", "", false
	}
	var fe fieldErrors
	if webhookAllowed {
		fe.onlyMembers(m, "", "the body", "domain", "webhook")
	} else {
		fe.onlyMembers(m, "", "the body", "domain")
	}
	raw, has := rawString(m["domain"])
	switch {
	case !has:
		fe.add("domain", "is required: a domain name such as example.com")
	default:
		d, msg := access.ParseDomain(raw)
		if msg != "" {
			fe.add("domain", msg)
		}
		domain = d
	}
	if v, present := m["webhook"]; present && !isNull(v) {
		if webhook, has = rawString(v); !has || webhook == "" {
			fe.add("webhook", "must be an absolute http(s) URL")
		}
	}
	if p := fe.problem(s.problems); p != nil {
		s.problems.Write(w, r, p)
		return "", "", false
	}
	return domain, webhook, true
}

// monitoringLifts reports whether r's caller monitors publisher live: its
// change feed then has no free-tier window.
func (s *Service) monitoringLifts(r *http.Request, publisher string) bool {
	c := s.caller(r)
	return c != nil && publisher != "" && s.monitor.Watching(c.AccountID, publisher)
}

// creditsView is the credits member of an account's GET /me.
type creditsView struct {
	Balance int64 `json:"balance"`
	// History is the last movements, newest first.
	History []kv.CreditEntry `json:"history"`
	Terms   string           `json:"terms"`
}

// creditsOf returns account's balance and last 50 movements.
func (s *Service) creditsOf(account string) (creditsView, error) {
	bal, err := s.db.CreditBalance(account)
	if err != nil {
		return creditsView{}, err
	}
	hist, err := s.db.CreditHistory(account, 50)
	if err != nil {
		return creditsView{}, err
	}
	return creditsView{Balance: bal, History: hist, Terms: "GET /x402"}, nil
}
