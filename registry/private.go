package registry

import (
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/julienschmidt/httprouter"

	"github.com/ardx-dev/ardx/index"
	"github.com/ardx-dev/ardx/kv"
	"github.com/ardx-dev/ardx/registry/access"
	"github.com/ardx-dev/ardx/registry/ingest"
	"github.com/ardx-dev/ardx/web"
)

// maxDeleteIDs bounds the identifiers one DELETE /private/entries names.
const maxDeleteIDs = 1000

// handlePrivateList handles "GET /private/entries": the caller's private
// entries across the domains it holds by claim, each with its domain.
func (s *Service) handlePrivateList(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	if !s.noParams(w, r) {
		return
	}
	c, ok := s.requireCaller(w, r, "private entries belong to a key")
	if !ok {
		return
	}
	entries, err := s.access.PrivateEntries(c)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	buf := append(make([]byte, 0, 512*len(entries)+64), `{"items":[`...)
	for i, e := range entries {
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = append(buf, `{"domain":`...)
		buf = strconv.AppendQuote(buf, access.DomainOfOwner(e.Owner))
		buf = append(buf, `,"createdAt":`...)
		buf = strconv.AppendQuote(buf, e.CreatedAt.UTC().Format("2006-01-02T15:04:05Z07:00"))
		buf = append(buf, `,"entry":`...)
		if buf, err = appendProjected(buf, e.Body, projection{visibility: visPrivate, keepRQ: true}); err != nil {
			s.writeError(w, r, err)
			return
		}
		buf = append(buf, '}')
	}
	buf = append(buf, `],"total":`...)
	buf = strconv.AppendInt(buf, int64(len(entries)), 10)
	buf = append(buf, "}\n"...)
	w.Header().Set("Cache-Control", "private, no-store")
	writeResponse(w, buf)
}

// privateRegisterResponse is the body of POST /private/entries.
type privateRegisterResponse struct {
	Domain     string   `json:"domain"`
	Registered []string `json:"registered"`
	Visibility string   `json:"visibility"`
	Searchable bool     `json:"searchable"`
}

// handlePrivateRegister handles "POST /private/entries": {domain, entries}
// registers ARD entries (validated as ingestion validates a manifest's) for
// a domain the key's account holds by claim. They are committed to kv and
// indexed before the answer.
func (s *Service) handlePrivateRegister(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	m, err := readObject(w, r, s.problems)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	var fe fieldErrors
	fe.onlyMembers(m, "", "a private entry registration", "domain", "entries")
	domain := domainMember(m, &fe)
	var entries []json.RawMessage
	if raw, ok := m["entries"]; !ok || isNull(raw) {
		fe.add("entries", "is required: an array of ARD entry objects")
	} else if err := json.Unmarshal(raw, &entries); err != nil {
		fe.add("entries", "must be an array of ARD entry objects")
	}
	if p := fe.problem(s.problems); p != nil {
		s.writeError(w, r, p)
		return
	}
	c, ok := s.requireCaller(w, r, "registering private entries needs the key of the domain's verified owner")
	if !ok {
		return
	}
	stored, err := s.access.RegisterPrivate(c, domain, entries)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if err := s.indexPrivate(stored); err != nil {
		s.writeError(w, r, err)
		return
	}
	ids := make([]string, len(stored))
	for i, e := range stored {
		ids[i] = e.ID
	}
	web.WriteJSON(w, http.StatusOK, privateRegisterResponse{Domain: domain, Registered: ids, Visibility: visPrivate, Searchable: true})
}

// indexPrivate puts stored private entries into the index.
func (s *Service) indexPrivate(stored []kv.Entry) error {
	docs := make([]index.Doc, 0, len(stored))
	for _, e := range stored {
		d, err := ingest.ToDoc(e)
		if err != nil {
			return err
		}
		docs = append(docs, d)
	}
	return s.ix.Put(docs)
}

// privateDeleteResponse is the body of DELETE /private/entries.
type privateDeleteResponse struct {
	Deleted []string `json:"deleted"`
	// NotFound are the identifiers that are not private entries of this
	// key's domains (unknown, public, or another holder's: the answer does
	// not say which).
	NotFound []string `json:"notFound"`
}

// handlePrivateDelete handles "DELETE /private/entries": {identifiers} (or
// {identifier}) removes the caller's private entries, within the domains
// its account holds by claim only.
func (s *Service) handlePrivateDelete(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	m, err := readObject(w, r, s.problems)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	var fe fieldErrors
	fe.onlyMembers(m, "", "a private entry deletion", "identifier", "identifiers")
	var ids []string
	if raw, ok := m["identifier"]; ok && !isNull(raw) {
		if id, ok := rawString(raw); ok && id != "" {
			ids = append(ids, id)
		} else {
			fe.add("identifier", "must be a non-empty string")
		}
	}
	if raw, ok := m["identifiers"]; ok && !isNull(raw) {
		var more []string
		if json.Unmarshal(raw, &more) != nil || len(more) == 0 || len(more) > maxDeleteIDs {
			fe.add("identifiers", "must be an array of 1 to "+strconv.Itoa(maxDeleteIDs)+" identifiers")
		}
		ids = append(ids, more...)
	}
	if len(ids) == 0 && len(fe) == 0 {
		fe.add("identifiers", "is required: the identifiers of the private entries to delete")
	}
	for i, id := range ids {
		if norm, _, msg := ingest.NormalizeIdentifier(id); msg == "" {
			ids[i] = norm
		}
	}
	if p := fe.problem(s.problems); p != nil {
		s.writeError(w, r, p)
		return
	}
	c, ok := s.requireCaller(w, r, "private entries belong to a key")
	if !ok {
		return
	}
	removed, err := s.access.DeletePrivate(c, ids)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	resp := privateDeleteResponse{Deleted: []string{}, NotFound: []string{}}
	gone := map[string]bool{}
	for _, e := range removed {
		resp.Deleted = append(resp.Deleted, e.ID)
		gone[e.ID] = true
	}
	for _, id := range ids {
		if !gone[id] {
			resp.NotFound = append(resp.NotFound, id)
		}
	}
	if len(resp.Deleted) > 0 {
		if err := s.ix.Delete(resp.Deleted); err != nil {
			s.writeError(w, r, err)
			return
		}
	}
	status := http.StatusOK
	if len(resp.Deleted) == 0 {
		s.writeError(w, r, s.problems.New(web.SlugNotFound, "none of these identifiers is a private entry of this key's domains"))
		return
	}
	web.WriteJSON(w, status, resp)
}
