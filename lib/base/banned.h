/* lib/base/banned.h — functions ward code must not call.
 *
 * Included last by every ward source file (through base/util.h). Each banned
 * name expands to a deliberately undefined identifier so a use fails to
 * compile with a message naming the function.
 */
#ifndef WARD_BANNED_H
#define WARD_BANNED_H

#define BANNED(func) sorry_##func##_is_a_banned_function

#undef strcpy
#define strcpy(x, y) BANNED(strcpy)
#undef strcat
#define strcat(x, y) BANNED(strcat)
#undef strncpy
#define strncpy(x, y, n) BANNED(strncpy)
#undef sprintf
#define sprintf(...) BANNED(sprintf)
#undef vsprintf
#define vsprintf(...) BANNED(vsprintf)
#undef gets
#define gets(x) BANNED(gets)
#undef system
#define system(x) BANNED(system)
#undef popen
#define popen(x, y) BANNED(popen)
#undef signal
#define signal(x, y) BANNED(signal)
#undef alloca
#define alloca(x) BANNED(alloca)
#undef strtok
#define strtok(x, y) BANNED(strtok)
#undef atoi
#define atoi(x) BANNED(atoi)

#endif
