package registry_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/ardx-dev/ardx/registry"
)

// Fuzz targets for the publisher tools' request decoders: whatever the
// body, the answer is a 200 with JSON or a problem document, never a 500 or
// a panic, and nothing is stored.

func fuzzPost(f *testing.F, path string, seeds ...string) {
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	// Every domain fails to resolve at once: the targets exercise decoding
	// and the document checks, not the network.
	fx := newPublisherServer(f, registry.Config{Fetcher: newFetcher(nil)}, nil)
	h := fx.svc.Handler()
	f.Fuzz(func(t *testing.T, body []byte) {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest(http.MethodPost, path, bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		h.ServeHTTP(rec, req)
		switch rec.Code {
		case http.StatusOK, http.StatusBadRequest, http.StatusUnprocessableEntity, http.StatusRequestEntityTooLarge:
		default:
			t.Fatalf("%s %q: status %d: %s", path, body, rec.Code, rec.Body.Bytes())
		}
		if !json.Valid(rec.Body.Bytes()) {
			t.Fatalf("%s %q: answer is not JSON: %s", path, body, rec.Body.Bytes())
		}
	})
}

func FuzzDoctorManifest(f *testing.F) {
	fuzzPost(f, "/doctor",
		`{"manifest":{"specVersion":"1.0","entries":[{"identifier":"urn:air:a.test:x","displayName":"X","type":"application/mcp-server-card+json","url":"https://a.test/x"}]}}`,
		`{"manifest":{"entries":[{"identifier":"urn:ai:A.test:n:x","type":"application/ai-catalog+json","displayName":"N","data":{"entries":[{"identifier":"urn:air:a.test:y"}]}}]}}`,
		`{"manifest":"{\"entries\":[1,null,\"x\",{}]}"}`,
		`{"manifest":{"collections":[],"entries":[{"metadata":{"a":[1]},"trustManifest":{"identity":""},"updatedAt":"2001-01-01T00:00:00Z"}]}}`,
		`{"manifest":"not json"}`,
		`{"domain":"a.test"}`,
	)
}

func FuzzToolsPost(f *testing.F) {
	fuzzPost(f, "/tools",
		`{"q":"send an email","limit":5,"withSchema":true}`,
		`{"q":"x","filter":{"type":["application/mcp-tool+json"],"tags":"email"}}`,
		`{"filter":{"publisher":[]}}`,
		`{}`,
	)
}

func FuzzManifestBuildRequest(f *testing.F) {
	fuzzPost(f, "/manifest/build",
		`{"domain":"a.test"}`,
		`{"domain":"a.test","sources":["https://a.test/openapi.json"]}`,
		`{"domain":"http://a.test/x"}`,
		`{"domain":"1.2.3.4","sources":[1]}`,
	)
}
