package registry

import (
	_ "embed"
	"encoding/json"
	"fmt"
)

// openapiTemplate is the registry's interface description (OpenAPI 3.1.0,
// interface version 1.0.0). Its servers list is filled in from PublicURL.
//
//go:embed openapi.json
var openapiTemplate []byte

// buildOpenAPI returns the description served at GET /openapi.json.
func buildOpenAPI(publicURL string) ([]byte, error) {
	var doc map[string]any
	if err := json.Unmarshal(openapiTemplate, &doc); err != nil {
		return nil, fmt.Errorf("registry: embedded openapi.json: %w", err)
	}
	doc["servers"] = []map[string]string{{"url": publicURL}}
	out, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(out, '\n'), nil
}
