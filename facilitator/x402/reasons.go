package x402

// Reason codes in VerifyResponse.InvalidReason and SettleResponse.ErrorReason.
// The invalid_exact_evm_* strings are the official TypeScript facilitator's
// (typescript/packages/mechanisms/evm/src/exact/facilitator/errors.ts), so a
// client keyed on official codes understands ours. Codes starting with
// invalid_ are ones the payer can act on.
const (
	// ReasonInvalidPayload: the body is not a decodable x402 request.
	ReasonInvalidPayload = "invalid_payload"
	// ReasonInvalidScheme: the payload's or the requirements' scheme is not "exact".
	ReasonInvalidScheme = "invalid_exact_evm_scheme"
	// ReasonUnsupportedScheme: no settlement mechanism for this scheme at all
	// (routing, before any network is chosen).
	ReasonUnsupportedScheme = "unsupported_scheme"
	// ReasonUnsupportedNetwork: the facilitator serves no such network (routing).
	ReasonUnsupportedNetwork = "unsupported_network"
	// ReasonUnsupportedPayloadType: the payload is not EIP-3009 (e.g. Permit2).
	ReasonUnsupportedPayloadType = "unsupported_payload_type"
	// ReasonNetworkMismatch: the payload's network differs from the requirements'.
	ReasonNetworkMismatch = "invalid_exact_evm_network_mismatch"
	// ReasonMissingEIP712Domain: requirements.extra lacks name or version.
	ReasonMissingEIP712Domain = "invalid_exact_evm_missing_eip712_domain"
	// ReasonAssetMismatch: requirements.asset is a contract but not the
	// token this network settles. Not an official code (the official
	// facilitator pays gas for any asset); ours refuses to relay arbitrary
	// contracts. An asset with no code is ReasonAssetNotDeployed.
	ReasonAssetMismatch = "invalid_exact_evm_asset_mismatch"
	// ReasonRecipientMismatch: authorization.to differs from payTo.
	ReasonRecipientMismatch = "invalid_exact_evm_recipient_mismatch"
	// ReasonAuthorizationValue: authorization.value differs from the required
	// amount (v1: maxAmountRequired).
	ReasonAuthorizationValue = "invalid_exact_evm_authorization_value"
	// ReasonAuthorizationValueMismatch is the same fault in v2, where the
	// official facilitator names it differently.
	ReasonAuthorizationValueMismatch = "invalid_exact_evm_payload_authorization_value_mismatch"
	// ReasonValidBefore: the authorization expires within 6 seconds or has expired.
	ReasonValidBefore = "invalid_exact_evm_payload_authorization_valid_before"
	// ReasonValidAfter: the authorization is not valid yet.
	ReasonValidAfter = "invalid_exact_evm_payload_authorization_valid_after"
	// ReasonSignature: the signature is not the payer's over this authorization.
	ReasonSignature = "invalid_exact_evm_signature"
	// ReasonFactoryNotAllowed: an ERC-6492 signature of a wallet not yet
	// deployed, whose factory is not on the allow list; this facilitator
	// deploys no wallets, so its list is empty.
	ReasonFactoryNotAllowed = "eip6492_factory_not_allowed"
	// ReasonEIP3009NotSupported: the asset has no authorizationState.
	ReasonEIP3009NotSupported = "invalid_exact_evm_eip3009_not_supported"
	// ReasonNonceAlreadyUsed: the authorization was used or canceled on-chain.
	ReasonNonceAlreadyUsed = "invalid_exact_evm_nonce_already_used"
	// ReasonTokenNameMismatch: the token's name() differs from extra.name.
	ReasonTokenNameMismatch = "invalid_exact_evm_token_name_mismatch"
	// ReasonTokenVersionMismatch: the token's version() differs from extra.version.
	ReasonTokenVersionMismatch = "invalid_exact_evm_token_version_mismatch"
	// ReasonInsufficientBalance: the payer holds less than the amount.
	ReasonInsufficientBalance = "invalid_exact_evm_insufficient_balance"
	// ReasonSimulationFailed: the simulated transfer reverted and the
	// diagnosis found no known cause (a high-s signature ends here too).
	ReasonSimulationFailed = "invalid_exact_evm_transaction_simulation_failed"
	// ReasonEVMTransactionFailed: the transfer was mined and reverted (hash
	// kept), or its gas estimate reverted for a reason settle cannot name.
	ReasonEVMTransactionFailed = "invalid_exact_evm_transaction_failed"
	// ReasonAssetNotDeployed: requirements.asset has no code.
	ReasonAssetNotDeployed = "asset_not_deployed_contract"

	// ReasonSanctioned: a paying, receiving or merchant address is on the
	// screened sanctions list; refused before any chain call.
	ReasonSanctioned = "sanctioned_address"
	// ReasonTransactionFailed: the facilitator could not get the transfer
	// done (broadcast refused, signer problem); nobody is charged.
	ReasonTransactionFailed = "transaction_failed"
	// ReasonServiceUnavailable: the network cannot settle now (RPC failing,
	// signer out of gas).
	ReasonServiceUnavailable = "service_unavailable"
	// ReasonSettlementPending: broadcast but not final within the response
	// window; the same body asked again returns the final outcome.
	ReasonSettlementPending = "settlement_pending"
)
