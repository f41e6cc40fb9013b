/* common/status.c -- names and descriptions of mbx_status, generated from MBX_STATUS_MAP. */
#include "include/moonbox.h"

MBX_API const char *mbx_status_name(mbx_status s) {
  switch (s) {
#define MBX_STATUS_NAME_(name, code, key, text)                                                    \
  case MBX_##name:                                                                                 \
    return "MBX_" #name;
    MBX_STATUS_MAP(MBX_STATUS_NAME_)
#undef MBX_STATUS_NAME_
  }
  return "MBX_UNKNOWN";
}

MBX_API const char *mbx_status_str(mbx_status s) {
  switch (s) {
#define MBX_STATUS_TEXT_(name, code, key, text)                                                    \
  case MBX_##name:                                                                                 \
    return text;
    MBX_STATUS_MAP(MBX_STATUS_TEXT_)
#undef MBX_STATUS_TEXT_
  }
  return "unknown status";
}

MBX_API const char *mbx_status_key(mbx_status s) {
  switch (s) {
#define MBX_STATUS_KEY_(name, code, key, text)                                                     \
  case MBX_##name:                                                                                 \
    return key;
    MBX_STATUS_MAP(MBX_STATUS_KEY_)
#undef MBX_STATUS_KEY_
  }
  return 0;
}
