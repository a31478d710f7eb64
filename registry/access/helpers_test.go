package access_test

import (
	"crypto/sha256"
	"encoding/hex"
	"time"

	"github.com/ardx-dev/ardx/kv"
	"github.com/ardx-dev/ardx/registry/access/x402pay"
)

// kvIntent is the intent Credits.Buy records for pay.
func kvIntent(account string, pay x402pay.Payment) kv.CreditIntent {
	sum := sha256.Sum256(pay.Body)
	return kv.CreditIntent{Account: account, BodyHash: hex.EncodeToString(sum[:]), CreatedAt: time.Now()}
}
