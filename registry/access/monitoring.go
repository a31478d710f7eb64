package access

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/ardx-dev/ardx/kv"
)

// Monitoring states. A monitoring is in its trial, active (a charged period
// runs), paused (the period ended and the balance could not pay the next
// one; it resumes when credits arrive) or stopped by its account. Nothing
// is ever deleted.
const (
	StateTrial   = "trial"
	StateActive  = "active"
	StatePaused  = "paused"
	StateStopped = "stopped"
)

// Monitoring prices (registry-service.md, Limits).
const (
	TrialLength   = 14 * 24 * time.Hour
	Period        = 30 * 24 * time.Hour
	PeriodCredits = 19_000
)

// ErrNotMonitored is Stop's error for a domain the account does not watch.
var ErrNotMonitored = errors.New("access: the account does not monitor this domain")

// ErrBadWebhook is Start's error for a webhook URL that is not an absolute
// http(s) URL without credentials.
var ErrBadWebhook = errors.New("access: webhook must be an absolute http(s) URL without credentials, at most 2048 characters")

// Monitor watches domains for accounts: the trial, the charges, the
// pauses. Its clock is injectable so tests walk through months.
type Monitor struct {
	DB  *kv.DB
	Now func() time.Time
}

// MonitorView is one monitored domain as its account sees it.
type MonitorView struct {
	Domain    string    `json:"domain"`
	State     string    `json:"state"`
	StartedAt time.Time `json:"startedAt"`
	// TrialEnd is when the free trial ends or ended (absent: no trial).
	TrialEnd *time.Time `json:"trialEnd,omitempty"`
	// PaidUntil is the end of the period paid or free so far.
	PaidUntil time.Time `json:"paidUntil"`
	// NextCharge is when PeriodCredits are next taken (absent when stopped).
	NextCharge    *time.Time `json:"nextCharge,omitempty"`
	CreditsPerRun int64      `json:"creditsPerPeriod"`
	PeriodDays    int        `json:"periodDays"`
	Webhook       string     `json:"webhook,omitempty"`
}

// StartResult is what Start did.
type StartResult struct {
	Monitor MonitorView `json:"monitoring"`
	// Trial tells whether this start granted the free trial, and why not.
	Trial       bool   `json:"trialGranted"`
	TrialReason string `json:"trialNote,omitempty"`
	// WebhookSecret signs the alerts; returned only when a webhook was set
	// by this call.
	WebhookSecret string `json:"webhookSecret,omitempty"`
}

func (m *Monitor) now() time.Time {
	if m.Now != nil {
		return m.Now().UTC()
	}
	return time.Now().UTC()
}

// errTrialTaken makes StartMonitor retry when another account took the
// trial between our read and our write.
var errTrialTaken = errors.New("trial taken meanwhile")

// Start begins (or resumes) account's monitoring of domain. The 14-day
// trial is granted once per domain, and always to a verified owner that has
// not had it; without a trial the first period is charged at once, and a
// balance that cannot pay it leaves the monitoring paused until credits
// arrive. webhook ("" for none) receives signed alerts; setting it returns a
// new signing secret, once.
func (m *Monitor) Start(account, domain string, verifiedOwner bool, webhook string) (StartResult, error) {
	if webhook != "" {
		if err := checkWebhook(webhook); err != nil {
			return StartResult{}, err
		}
	}
	now := m.now()
	var res StartResult
	cur, err := m.DB.GetMonitor(account, domain)
	switch {
	case err == nil:
		// Changed in one transaction, so a charge running meanwhile is kept.
		cur, err = m.DB.UpdateMonitor(account, domain, func(cur *kv.Monitor) error {
			if cur.State == StateStopped {
				cur.State = StatePaused
				cur.StoppedAt = time.Time{}
				if now.Before(cur.PaidUntil) {
					cur.State = stateWithin(*cur, now)
				}
			}
			if webhook != "" && webhook != cur.WebhookURL {
				cur.WebhookURL, cur.WebhookSecret = webhook, newSecret()
				res.WebhookSecret = cur.WebhookSecret
			}
			return nil
		})
		if err != nil {
			return StartResult{}, err
		}
		res.TrialReason = "this account has monitored the domain before"
	case errors.Is(err, kv.ErrNotFound):
		cur = kv.Monitor{Domain: domain, Account: account, StartedAt: now, PaidUntil: now, State: StatePaused}
		if webhook != "" {
			cur.WebhookURL, cur.WebhookSecret = webhook, newSecret()
			res.WebhookSecret = cur.WebhookSecret
		}
		for range 3 {
			had, err := m.DB.TrialAccounts(domain)
			if err != nil {
				return StartResult{}, err
			}
			grant, why := trialAllowed(had, account, verifiedOwner)
			rec := cur
			if grant {
				rec.State, rec.TrialEnd, rec.PaidUntil = StateTrial, now.Add(TrialLength), now.Add(TrialLength)
			}
			err = m.DB.StartMonitor(rec, grant, func(now []string) error {
				if g, _ := trialAllowed(now, account, verifiedOwner); g != grant {
					return errTrialTaken
				}
				return nil
			})
			if errors.Is(err, errTrialTaken) {
				continue
			}
			if err != nil {
				return StartResult{}, err
			}
			cur, res.Trial, res.TrialReason = rec, grant, why
			break
		}
	default:
		return StartResult{}, err
	}
	if cur.State == StatePaused {
		if cur, err = m.charge(cur, now); err != nil {
			return StartResult{}, err
		}
	}
	res.Monitor = view(cur)
	return res, nil
}

// trialAllowed: once per domain; a verified owner gets it unless this very
// account had it.
func trialAllowed(had []string, account string, verifiedOwner bool) (bool, string) {
	switch {
	case slices.Contains(had, account):
		return false, "this account already had the domain's free trial"
	case len(had) == 0:
		return true, ""
	case verifiedOwner:
		return true, "granted to the domain's verified owner"
	}
	return false, "the domain's free trial was already used; a verified owner of the domain (POST /claim) still gets one"
}

// Stop stops account's monitoring of domain. The period already paid is
// kept: starting again within it charges nothing.
func (m *Monitor) Stop(account, domain string) (MonitorView, error) {
	cur, err := m.DB.GetMonitor(account, domain)
	if errors.Is(err, kv.ErrNotFound) {
		return MonitorView{}, ErrNotMonitored
	}
	if err != nil {
		return MonitorView{}, err
	}
	if cur.State != StateStopped {
		now := m.now()
		if cur, err = m.DB.UpdateMonitor(account, domain, func(cur *kv.Monitor) error {
			cur.State, cur.StoppedAt = StateStopped, now
			return nil
		}); err != nil {
			return MonitorView{}, err
		}
	}
	return view(cur), nil
}

// Mine lists account's monitorings, stopped ones included.
func (m *Monitor) Mine(account string) ([]MonitorView, error) {
	out := []MonitorView{}
	err := m.DB.Monitors(func(r kv.Monitor) error {
		if r.Account == account {
			out = append(out, view(r))
		}
		return nil
	})
	return out, err
}

// Watching reports whether account's monitoring of domain is live (in its
// trial or a paid period) now: what lifts the feed's free-tier window.
func (m *Monitor) Watching(account, domain string) bool {
	if account == "" || domain == "" {
		return false
	}
	cur, err := m.DB.GetMonitor(account, domain)
	return err == nil && live(cur, m.now())
}

func live(r kv.Monitor, now time.Time) bool {
	return (r.State == StateTrial || r.State == StateActive) && now.Before(r.PaidUntil)
}

// Sweep charges every monitoring whose period has ended, pausing those the
// balance cannot pay, and resumes paused ones whose account can now pay.
// It returns how many it charged and how many are paused.
func (m *Monitor) Sweep() (charged, paused int, err error) {
	now := m.now()
	var due []kv.Monitor
	if err := m.DB.Monitors(func(r kv.Monitor) error {
		if r.State != StateStopped && !now.Before(r.PaidUntil) {
			due = append(due, r)
		}
		return nil
	}); err != nil {
		return 0, 0, err
	}
	for _, r := range due {
		r, err := m.charge(r, now)
		if err != nil {
			return charged, paused, err
		}
		if r.State == StatePaused {
			paused++
		} else {
			charged++
		}
	}
	return charged, paused, nil
}

// charge takes PeriodCredits for the period starting at r.PaidUntil. The
// ledger reference names the account, the domain and the period's start,
// so a charge repeated after a crash takes nothing more. A monitoring paused
// for a while resumes from now: its period start is moved to now and stored
// first, so the reference stays the same across a crash.
func (m *Monitor) charge(r kv.Monitor, now time.Time) (kv.Monitor, error) {
	if r.State == StatePaused && r.PaidUntil.Before(now.Add(-time.Minute)) {
		var err error
		r, err = m.DB.UpdateMonitor(r.Account, r.Domain, func(cur *kv.Monitor) error {
			if cur.State == StatePaused && cur.PaidUntil.Equal(r.PaidUntil) {
				cur.PaidUntil = now
			}
			return nil
		})
		if err != nil {
			return r, err
		}
	}
	for r.State != StateStopped && !now.Before(r.PaidUntil) {
		start := r.PaidUntil
		ref := fmt.Sprintf("monitoring:%s:%s:%d", r.Account, r.Domain, start.Unix())
		_, _, err := m.DB.ApplyCredit(r.Account, kv.CreditEntry{
			Time: now, Delta: -PeriodCredits, Kind: CreditMonitoring, Ref: ref,
			Detail: []byte(fmt.Sprintf(`{"domain":%q,"from":%q,"to":%q}`, r.Domain,
				start.Format(time.RFC3339), start.Add(Period).Format(time.RFC3339))),
		})
		paid := err == nil
		if err != nil && !errors.Is(err, kv.ErrInsufficientCredits) {
			return r, err
		}
		// The record is changed in one transaction against what is stored
		// now: a stop that came meanwhile stays a stop (a period it paid
		// stays paid).
		r, err = m.DB.UpdateMonitor(r.Account, r.Domain, func(cur *kv.Monitor) error {
			switch {
			case !cur.PaidUntil.Equal(start):
				// Another charge moved the period on already.
			case paid:
				cur.PaidUntil = start.Add(Period)
				if cur.State != StateStopped {
					cur.State = StateActive
				}
			case cur.State != StateStopped:
				cur.State = StatePaused
			}
			return nil
		})
		if err != nil || !paid {
			return r, err
		}
	}
	return r, nil
}

// ResumeAccount charges account's paused monitorings now, after it bought
// credits.
func (m *Monitor) ResumeAccount(account string) error {
	now := m.now()
	var paused []kv.Monitor
	if err := m.DB.Monitors(func(r kv.Monitor) error {
		if r.Account == account && r.State == StatePaused {
			paused = append(paused, r)
		}
		return nil
	}); err != nil {
		return err
	}
	for _, r := range paused {
		if _, err := m.charge(r, now); err != nil {
			return err
		}
	}
	return nil
}

func stateWithin(r kv.Monitor, now time.Time) string {
	if !r.TrialEnd.IsZero() && now.Before(r.TrialEnd) && !r.PaidUntil.After(r.TrialEnd) {
		return StateTrial
	}
	return StateActive
}

func view(r kv.Monitor) MonitorView {
	v := MonitorView{Domain: r.Domain, State: r.State, StartedAt: r.StartedAt, PaidUntil: r.PaidUntil,
		CreditsPerRun: PeriodCredits, PeriodDays: int(Period / (24 * time.Hour)), Webhook: r.WebhookURL}
	if !r.TrialEnd.IsZero() {
		t := r.TrialEnd
		v.TrialEnd = &t
	}
	if r.State != StateStopped {
		t := r.PaidUntil
		v.NextCharge = &t
	}
	return v
}

func checkWebhook(raw string) error {
	u, err := url.Parse(raw)
	if err != nil || len(raw) > 2048 || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil || strings.ContainsAny(raw, " \t\r\n") {
		return ErrBadWebhook
	}
	return nil
}

func newSecret() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return "whsec_" + hex.EncodeToString(b)
}
