package wire

import "strconv"

// PMI return codes, shared by PMI-1 (pmi.h) and PMI-2 (pmi2.h). Replies
// carry them in rc=; a missing rc= means RcSuccess.
const (
	RcSuccess          = 0
	RcFail             = -1
	RcErrInit          = 1
	RcNoMem            = 2
	RcInvalidArg       = 3
	RcInvalidKey       = 4
	RcInvalidKeyLength = 5
	RcInvalidVal       = 6
	RcInvalidValLength = 7
	RcInvalidLength    = 8
	RcInvalidNumArgs   = 9
	RcInvalidArgs      = 10
	RcInvalidNumParsed = 11
	RcInvalidKeyvalp   = 12
	RcInvalidSize      = 13
	// RcErrOther exists in PMI-2 only; PMI-1 clients treat any non-zero rc
	// as failure, so it is safe there too.
	RcErrOther = 14
)

var rcNames = map[int]string{
	RcSuccess:          "PMI_SUCCESS",
	RcFail:             "PMI_FAIL",
	RcErrInit:          "PMI_ERR_INIT",
	RcNoMem:            "PMI_ERR_NOMEM",
	RcInvalidArg:       "PMI_ERR_INVALID_ARG",
	RcInvalidKey:       "PMI_ERR_INVALID_KEY",
	RcInvalidKeyLength: "PMI_ERR_INVALID_KEY_LENGTH",
	RcInvalidVal:       "PMI_ERR_INVALID_VAL",
	RcInvalidValLength: "PMI_ERR_INVALID_VAL_LENGTH",
	RcInvalidLength:    "PMI_ERR_INVALID_LENGTH",
	RcInvalidNumArgs:   "PMI_ERR_INVALID_NUM_ARGS",
	RcInvalidArgs:      "PMI_ERR_INVALID_ARGS",
	RcInvalidNumParsed: "PMI_ERR_INVALID_NUM_PARSED",
	RcInvalidKeyvalp:   "PMI_ERR_INVALID_KEYVALP",
	RcInvalidSize:      "PMI_ERR_INVALID_SIZE",
	RcErrOther:         "PMI2_ERR_OTHER",
}

// RcName returns the C name of a return code (PMI_ERR_INVALID_KEY), or the
// number for codes no header defines.
func RcName(rc int) string {
	if n, ok := rcNames[rc]; ok {
		return n
	}
	return "rc " + strconv.Itoa(rc)
}
