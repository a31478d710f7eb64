package evm

import (
	"crypto/ecdsa"
	"crypto/rand"
	"errors"
	"fmt"
	"math/big"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/crypto"

	"github.com/ardx-dev/ardx/facilitator/x402"
)

// PayOptions adjust the authorization a client signs. The zero value signs
// what the official x402 client signs: from = the key's address, to =
// payTo, value = the required amount, validAfter = now - 600, validBefore =
// now + maxTimeoutSeconds, a random nonce, over the domain named by the
// requirements' extra, network and asset.
type PayOptions struct {
	Now         time.Time
	From        *common.Address // a smart wallet the key owns
	To          *common.Address
	Value       *big.Int
	ValidAfter  *big.Int
	ValidBefore *big.Int
	Nonce       *[32]byte
	// Domain replaces the domain signed over (to sign for the wrong token).
	Domain *Domain
}

// PaymentV1 signs a payment for v1 requirements and returns the complete
// /verify and /settle body a v1 merchant would send.
func PaymentV1(key *ecdsa.PrivateKey, req x402.PaymentRequirementsV1, opt PayOptions) (x402.RequestV1, error) {
	auth, sig, err := signFor(key, req.Network, req.Asset, string(req.MaxAmountRequired), req.PayTo, int64(req.MaxTimeoutSeconds), req.Extra, opt)
	if err != nil {
		return x402.RequestV1{}, err
	}
	return x402.NewRequestV1(x402.NewPayloadV1(req, auth, sig), req), nil
}

// PaymentV2 signs a payment for v2 requirements and returns the complete
// body a v2 merchant would send (the payload's accepted is req verbatim).
func PaymentV2(key *ecdsa.PrivateKey, resource *x402.ResourceInfo, req x402.PaymentRequirementsV2, opt PayOptions) (x402.RequestV2, error) {
	auth, sig, err := signFor(key, req.Network, req.Asset, string(req.Amount), req.PayTo, int64(req.MaxTimeoutSeconds), req.Extra, opt)
	if err != nil {
		return x402.RequestV2{}, err
	}
	return x402.NewRequestV2(x402.NewPayloadV2(resource, req, auth, sig, nil), req), nil
}

func signFor(key *ecdsa.PrivateKey, network, asset, amount, payTo string, timeout int64, extra *x402.Extra, opt PayOptions) (x402.Authorization, []byte, error) {
	if key == nil {
		return x402.Authorization{}, nil, errors.New("evm: no payer key")
	}
	var a TransferAuthorization
	a.From = crypto.PubkeyToAddress(key.PublicKey)
	if opt.From != nil {
		a.From = *opt.From
	}
	a.To = common.HexToAddress(payTo)
	if opt.To != nil {
		a.To = *opt.To
	}
	value, err := x402.ParseUint256(amount)
	if opt.Value != nil {
		value, err = opt.Value, nil
	}
	if err != nil {
		return x402.Authorization{}, nil, fmt.Errorf("evm: amount: %w", err)
	}
	a.Value = value
	now := opt.Now
	if now.IsZero() {
		now = time.Now()
	}
	a.ValidAfter = big.NewInt(now.Unix() - 600)
	if opt.ValidAfter != nil {
		a.ValidAfter = opt.ValidAfter
	}
	a.ValidBefore = big.NewInt(now.Unix() + timeout)
	if opt.ValidBefore != nil {
		a.ValidBefore = opt.ValidBefore
	}
	if opt.Nonce != nil {
		a.Nonce = *opt.Nonce
	} else if _, err := rand.Read(a.Nonce[:]); err != nil {
		return x402.Authorization{}, nil, err
	}

	var d Domain
	if opt.Domain != nil {
		d = *opt.Domain
	} else {
		chainID, ok := ChainIDOf(network)
		if !ok {
			return x402.Authorization{}, nil, fmt.Errorf("evm: cannot sign for network %q: unknown chain id", network)
		}
		if extra == nil || extra.Name == "" || extra.Version == "" {
			return x402.Authorization{}, nil, errors.New("evm: the requirements' extra lacks the EIP-712 name and version")
		}
		d = Domain{Name: extra.Name, Version: extra.Version, ChainID: chainID, VerifyingContract: common.HexToAddress(asset)}
	}
	sig, err := signDigest(key, Digest(d, a))
	if err != nil {
		return x402.Authorization{}, nil, err
	}
	return a.Wire(), sig, nil
}
