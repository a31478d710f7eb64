// SPDX-License-Identifier: MIT
pragma solidity ^0.8.20;

// TestWallet1271 is the smallest ERC-1271 contract wallet: a signature is
// valid when it is the owner's ECDSA signature (65 bytes, v in {27, 28}) over
// the hash the token asks about. It stands in for smart wallets in tests.
contract TestWallet1271 {
    address public immutable owner;

    constructor(address owner_) {
        owner = owner_;
    }

    function isValidSignature(bytes32 hash, bytes memory signature) external view returns (bytes4) {
        if (signature.length != 65) {
            return 0xffffffff;
        }
        bytes32 r;
        bytes32 s;
        uint8 v;
        assembly {
            r := mload(add(signature, 0x20))
            s := mload(add(signature, 0x40))
            v := byte(0, mload(add(signature, 0x60)))
        }
        if (ecrecover(hash, v, r, s) == owner && owner != address(0)) {
            return 0x1626ba7e;
        }
        return 0xffffffff;
    }
}
