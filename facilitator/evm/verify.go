package evm

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/big"
	"strings"

	"github.com/ethereum/go-ethereum"
	"github.com/ethereum/go-ethereum/accounts/abi"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/rpc"

	"github.com/ardx-dev/ardx/facilitator/x402"
)

// validBeforeMargin is the official facilitator's buffer for a block to be
// produced: an authorization must stay valid at least this long.
const validBeforeMargin = 6

// checked is a payment that passed every check that needs no simulation.
type checked struct {
	auth TransferAuthorization
	// sig is what goes on-chain: the 65 bytes with v as 27/28 when vrs is
	// set, else the signature for the bytes overload (ERC-1271).
	sig []byte
	vrs bool
}

// Verify checks a payment completely without moving anything, in the
// official TypeScript facilitator's order: scheme, EIP-712 domain in extra,
// network, signature, recipient, time window, exact amount, asset, then a
// simulated transferWithAuthorization and, when that reverts, a diagnosis.
func (n *Network) Verify(ctx context.Context, req *x402.PaymentRequest) x402.VerifyResponse {
	ctx, cancel := context.WithTimeout(ctx, n.timeout)
	defer cancel()
	c, fail := n.check(ctx, req)
	if fail != nil {
		return *fail
	}
	if fail := n.simulate(ctx, req, c); fail != nil {
		return *fail
	}
	return x402.VerifyResponse{IsValid: true, Payer: req.Payer()}
}

// Check runs every check of Verify short of the simulation: the settle
// path's re-verification. As in the official facilitator (simulateInSettle
// off), settle then learns the rest from the gas estimate of the transfer
// itself (Simulate), whose revert is read as the official settle reads it.
func (n *Network) Check(ctx context.Context, req *x402.PaymentRequest) x402.VerifyResponse {
	ctx, cancel := context.WithTimeout(ctx, n.timeout)
	defer cancel()
	if _, fail := n.check(ctx, req); fail != nil {
		return *fail
	}
	return x402.VerifyResponse{IsValid: true, Payer: req.Payer()}
}

func invalidf(req *x402.PaymentRequest, reason, format string, args ...any) *x402.VerifyResponse {
	return &x402.VerifyResponse{IsValid: false, InvalidReason: reason, InvalidMessage: fmt.Sprintf(format, args...), Payer: req.Payer()}
}

// matches reports whether network names this network in the request's
// version: the CAIP-2 id in v2, the short name in v1 (the decoder has
// already refused the other form).
func (n *Network) matches(version int, network string) bool {
	if version == x402.Version1 {
		return n.v1 != "" && network == n.v1
	}
	return network == n.id
}

// check runs every check short of simulating the transfer.
func (n *Network) check(ctx context.Context, req *x402.PaymentRequest) (*checked, *x402.VerifyResponse) {
	rq := &req.Requirements
	if req.Scheme != x402.SchemeExact || rq.Scheme != x402.SchemeExact {
		return nil, invalidf(req, x402.ReasonInvalidScheme,
			"only the exact scheme is settled; the payload says %q and the requirements %q", req.Scheme, rq.Scheme)
	}
	if rq.Name == "" || rq.Version == "" {
		return nil, invalidf(req, x402.ReasonMissingEIP712Domain,
			"paymentRequirements.extra must carry the token's EIP-712 name and version (for this asset %q and %q)", n.name, n.version)
	}
	if req.PayloadNetwork != rq.Network {
		return nil, invalidf(req, x402.ReasonNetworkMismatch,
			"the payload is for network %q but the requirements are for %q", req.PayloadNetwork, rq.Network)
	}
	if !n.matches(req.X402Version, rq.Network) {
		return nil, invalidf(req, x402.ReasonNetworkMismatch,
			"network %q is not %s (%s)", rq.Network, n.id, n.v1)
	}
	auth, err := ParseAuthorization(req.Authorization)
	if err != nil {
		return nil, invalidf(req, x402.ReasonInvalidPayload, "%v", err)
	}
	sig, err := hexutil.Decode(req.Signature)
	if err != nil || len(sig) == 0 {
		return nil, invalidf(req, x402.ReasonInvalidPayload, "the signature is not 0x hex")
	}
	// The payer signed over the asset the requirements name; whether that
	// asset is ours is asked after the payment itself is checked, as the
	// official facilitator does.
	asset := common.HexToAddress(rq.Asset)
	domain := Domain{Name: rq.Name, Version: rq.Version, ChainID: n.chainID, VerifyingContract: asset}
	c := &checked{auth: auth}
	if fail := n.checkSignature(ctx, req, c, Digest(domain, auth), sig); fail != nil {
		return nil, fail
	}
	if !x402.EqualAddress(req.Authorization.To, rq.PayTo) {
		return nil, invalidf(req, x402.ReasonRecipientMismatch,
			"the authorization pays %s but the merchant's payTo is %s", req.Authorization.To, rq.PayTo)
	}
	now := big.NewInt(n.now().Unix())
	if auth.ValidBefore.Cmp(new(big.Int).Add(now, big.NewInt(validBeforeMargin))) < 0 {
		return nil, invalidf(req, x402.ReasonValidBefore,
			"the authorization expires at %s, less than %d s from now (%s)", auth.ValidBefore, validBeforeMargin, now)
	}
	if auth.ValidAfter.Cmp(now) > 0 {
		return nil, invalidf(req, x402.ReasonValidAfter,
			"the authorization is valid only after %s; it is now %s", auth.ValidAfter, now)
	}
	required, err := x402.ParseUint256(rq.Amount)
	if err != nil {
		return nil, invalidf(req, x402.ReasonInvalidPayload, "required amount: %v", err)
	}
	if auth.Value.Cmp(required) != 0 {
		reason := x402.ReasonAuthorizationValue
		if req.X402Version == x402.Version2 {
			reason = x402.ReasonAuthorizationValueMismatch
		}
		return nil, invalidf(req, reason,
			"the authorization is for %s but the requirements ask exactly %s", auth.Value, required)
	}
	if asset != n.asset {
		return nil, n.foreignAsset(ctx, req, asset)
	}
	return c, nil
}

// foreignAsset answers for requirements naming an asset that is not this
// network's token: asset_not_deployed_contract when it has no code (the
// official reason), else invalid_exact_evm_asset_mismatch (ours: the
// facilitator does not pay gas to call arbitrary contracts).
func (n *Network) foreignAsset(ctx context.Context, req *x402.PaymentRequest, asset common.Address) *x402.VerifyResponse {
	code, err := n.backend.CodeAt(ctx, asset, nil)
	switch {
	case err != nil:
		return invalidf(req, x402.ReasonServiceUnavailable, "could not read the asset's code from the network's RPC")
	case len(code) == 0:
		return invalidf(req, x402.ReasonAssetNotDeployed,
			"asset %s is not a contract on %s; this network settles %s", asset.Hex(), n.id, n.asset.Hex())
	}
	return invalidf(req, x402.ReasonAssetMismatch,
		"asset %s is not the token settled on %s (%s)", asset.Hex(), n.id, n.asset.Hex())
}

// checkSignature accepts an ECDSA signature by the payer, or a signature a
// deployed ERC-1271 wallet at the payer's address accepts, as the official
// facilitator does: an address without code must have signed 65 bytes that
// recover to it, anything else is invalid_exact_evm_signature. A high s
// recovers here as it does in viem; the token refuses it, which the
// simulation then reports. A counterfactual (ERC-6492) wallet is refused
// with the official reason for a factory not on the allow list: this
// facilitator allows none, it never deploys wallets.
func (n *Network) checkSignature(ctx context.Context, req *x402.PaymentRequest, c *checked, digest common.Hash, sig []byte) *x402.VerifyResponse {
	from := c.auth.From
	wrapped := len(sig) > 32 && bytes.Equal(sig[len(sig)-32:], erc6492Magic)
	if len(sig) == 65 && !wrapped {
		// The hot path: an EOA's signature needs no RPC at all.
		if got, err := recoverAnyS(digest, sig); err == nil && got == from {
			c.sig, c.vrs = normaliseV(sig), true
			return nil
		}
	}
	code, err := n.backend.CodeAt(ctx, from, nil)
	if err != nil {
		return invalidf(req, x402.ReasonServiceUnavailable, "could not read the payer's code from the network's RPC")
	}
	if len(code) == 0 {
		switch {
		case wrapped:
			return invalidf(req, x402.ReasonFactoryNotAllowed,
				"%s is an undeployed smart wallet (ERC-6492 signature); this facilitator deploys no wallets: deploy it before paying", from.Hex())
		case len(sig) == 65:
			got, err := recoverAnyS(digest, sig)
			if err != nil {
				return invalidf(req, x402.ReasonSignature, "the signature is malformed: %v", err)
			}
			return invalidf(req, x402.ReasonSignature,
				"the signature was made by %s, not the payer %s (check the EIP-712 domain: name %q, version %q, chain %s, contract %s)",
				got.Hex(), from.Hex(), req.Requirements.Name, req.Requirements.Version, n.chainID, req.Requirements.Asset)
		default:
			return invalidf(req, x402.ReasonSignature,
				"%s has no code, so it must sign 65 bytes (r, s, v); this signature is %d bytes", from.Hex(), len(sig))
		}
	}
	if wrapped {
		inner, err := unwrap6492(sig)
		if err != nil {
			return invalidf(req, x402.ReasonSignature, "the ERC-6492 signature wrapper does not decode: %v", err)
		}
		sig = inner
	}
	out, err := n.callAt(ctx, from, common.Address{}, methodIsValidSignature, [32]byte(digest), sig)
	if err != nil && !isRevert(err) && !errors.Is(err, errNoReturn) {
		return invalidf(req, x402.ReasonServiceUnavailable, "could not ask the payer's wallet contract through the network's RPC")
	}
	if err != nil || len(out) == 0 || out[0].([4]byte) != erc1271Magic {
		return invalidf(req, x402.ReasonSignature, "the wallet contract %s does not accept the signature (ERC-1271)", from.Hex())
	}
	c.sig, c.vrs = sig, len(sig) == 65
	if c.vrs {
		c.sig = normaliseV(sig)
	}
	return nil
}

// normaliseV returns a copy with v as 27/28, the form the token's (v,r,s)
// overload and FiatToken's ECRecover accept.
func normaliseV(sig []byte) []byte {
	s := bytes.Clone(sig)
	if s[64] < 27 {
		s[64] += 27
	}
	return s
}

var erc6492Args = abi.Arguments{
	{Type: mustType("address")}, {Type: mustType("bytes")}, {Type: mustType("bytes")},
}

func mustType(t string) abi.Type {
	ty, err := abi.NewType(t, "", nil)
	if err != nil {
		panic(err)
	}
	return ty
}

// unwrap6492 returns the inner signature of abi.encode(factory, calldata, sig) ‖ magic.
func unwrap6492(sig []byte) ([]byte, error) {
	vals, err := erc6492Args.Unpack(sig[:len(sig)-32])
	if err != nil {
		return nil, err
	}
	return vals[2].([]byte), nil
}

// transferCalldata encodes transferWithAuthorization with the overload the
// signature needs: (v,r,s) for 65 bytes, bytes otherwise.
func transferCalldata(c *checked) []byte {
	a := c.auth
	var (
		in  []byte
		err error
		m   abi.Method
	)
	if c.vrs {
		m = methodTransferVRS
		in, err = m.Inputs.Pack(a.From, a.To, a.Value, a.ValidAfter, a.ValidBefore, a.Nonce,
			c.sig[64], [32]byte(c.sig[:32]), [32]byte(c.sig[32:64]))
	} else {
		m = methodTransferBytes
		in, err = m.Inputs.Pack(a.From, a.To, a.Value, a.ValidAfter, a.ValidBefore, a.Nonce, c.sig)
	}
	if err != nil {
		// The values come from a parsed authorization; a failure is a bug.
		panic(fmt.Sprintf("evm: pack %s: %v", m.Sig, err))
	}
	return append(append([]byte{}, m.ID...), in...)
}

// simulate eth_calls the transfer from the first signer and diagnoses a revert.
func (n *Network) simulate(ctx context.Context, req *x402.PaymentRequest, c *checked) *x402.VerifyResponse {
	msg := ethereum.CallMsg{From: n.signers[0].addr, To: &n.asset, Data: transferCalldata(c)}
	if _, err := n.backend.CallContract(ctx, msg, nil); err != nil {
		if isRevert(err) {
			return n.diagnose(ctx, req, c, revertReason(err))
		}
		return invalidf(req, x402.ReasonServiceUnavailable, "the network's RPC failed while simulating the transfer")
	}
	return nil
}

// diagnose names why a simulated transfer reverted, in the official
// facilitator's priority: EIP-3009 support, nonce used, token name,
// token version, balance; then the revert text itself.
func (n *Network) diagnose(ctx context.Context, req *x402.PaymentRequest, c *checked, revert string) *x402.VerifyResponse {
	a := c.auth
	unavailable := invalidf(req, x402.ReasonServiceUnavailable, "the network's RPC failed while diagnosing a reverted simulation (%s)", revert)
	out, err := n.call(ctx, common.Address{}, methodAuthorizationState, a.From, a.Nonce)
	switch {
	case err != nil && (isRevert(err) || errors.Is(err, errNoReturn)):
		return invalidf(req, x402.ReasonEIP3009NotSupported, "asset %s does not implement EIP-3009 authorizationState", n.asset.Hex())
	case err != nil:
		return unavailable
	case out[0].(bool):
		return invalidf(req, x402.ReasonNonceAlreadyUsed,
			"authorization nonce %s of %s was already used or canceled", hexutil.Encode(a.Nonce[:]), a.From.Hex())
	}
	if name, err := n.callString(ctx, methodName); err == nil && name != req.Requirements.Name {
		return invalidf(req, x402.ReasonTokenNameMismatch,
			"the token's EIP-712 name is %q but extra.name is %q", name, req.Requirements.Name)
	}
	if version, err := n.callString(ctx, methodVersion); err == nil && version != req.Requirements.Version {
		return invalidf(req, x402.ReasonTokenVersionMismatch,
			"the token's EIP-712 version is %q but extra.version is %q", version, req.Requirements.Version)
	}
	out, err = n.call(ctx, common.Address{}, methodBalanceOf, a.From)
	if err != nil && !isRevert(err) {
		return unavailable
	}
	if err == nil {
		if bal := out[0].(*big.Int); bal.Cmp(a.Value) < 0 {
			return invalidf(req, x402.ReasonInsufficientBalance,
				"%s holds %s of the asset but the payment needs %s", a.From.Hex(), bal, a.Value)
		}
	}
	// The official verify stops here: the revert text is not read (a
	// high-s signature is "simulation failed", not "invalid signature").
	return invalidf(req, x402.ReasonSimulationFailed, "the simulated transfer reverted: %s", revert)
}

// settleRevert names the reason of a transfer whose gas estimate reverted
// on the settle path, from the revert text, as the official facilitator's
// settle does (parseEip3009TransferError): it has not simulated before, so
// a wrong EIP-712 domain shows here as the token's "invalid signature".
func settleRevert(req *x402.PaymentRequest, revert string) *x402.VerifyResponse {
	reason := x402.ReasonEVMTransactionFailed
	r := strings.ToLower(revert)
	switch {
	case strings.Contains(r, "authorization is expired"), strings.Contains(r, "authorizationexpired"):
		reason = x402.ReasonValidBefore
	case strings.Contains(r, "authorization is not yet valid"), strings.Contains(r, "authorizationnotyetvalid"):
		reason = x402.ReasonValidAfter
	case strings.Contains(r, "authorization is used"), strings.Contains(r, "authorizationalreadyused"), strings.Contains(r, "authorizationusedorcanceled"):
		reason = x402.ReasonNonceAlreadyUsed
	case strings.Contains(r, "exceeds balance"), strings.Contains(r, "insufficient balance"), strings.Contains(r, "erc20insufficientbalance"):
		reason = x402.ReasonInsufficientBalance
	case strings.Contains(r, "invalid signature"), strings.Contains(r, "signermismatch"), strings.Contains(r, "invalidsignature"):
		reason = x402.ReasonSignature
	}
	return invalidf(req, reason, "the transfer's gas estimate reverted: %s", revert)
}

// isRevert tells a contract revert (the payment's fault) from a failing RPC
// (ours): nodes answer reverts with JSON-RPC error code 3 or the text
// "execution reverted".
func isRevert(err error) bool {
	var de rpc.DataError
	if errors.As(err, &de) {
		return true
	}
	return strings.Contains(err.Error(), "execution reverted")
}

// revertReason extracts the revert string of a reverted call.
func revertReason(err error) string {
	var de rpc.DataError
	if errors.As(err, &de) {
		if s, ok := de.ErrorData().(string); ok {
			if data, derr := hexutil.Decode(s); derr == nil {
				if reason, uerr := abi.UnpackRevert(data); uerr == nil {
					return reason
				}
			}
		}
	}
	msg := err.Error()
	if _, after, ok := strings.Cut(msg, "execution reverted: "); ok {
		return after
	}
	return msg
}
