/* A Bison parser, made by GNU Bison 3.8.2.  */

/* Bison implementation for Yacc-like parsers in C

   Copyright (C) 1984, 1989-1990, 2000-2015, 2018-2021 Free Software Foundation,
   Inc.

   This program is free software: you can redistribute it and/or modify
   it under the terms of the GNU General Public License as published by
   the Free Software Foundation, either version 3 of the License, or
   (at your option) any later version.

   This program is distributed in the hope that it will be useful,
   but WITHOUT ANY WARRANTY; without even the implied warranty of
   MERCHANTABILITY or FITNESS FOR A PARTICULAR PURPOSE.  See the
   GNU General Public License for more details.

   You should have received a copy of the GNU General Public License
   along with this program.  If not, see <https://www.gnu.org/licenses/>.  */

/* As a special exception, you may create a larger work that contains
   part or all of the Bison parser skeleton and distribute that work
   under terms of your choice, so long as that work isn't itself a
   parser generator using the skeleton or a modified version thereof
   as a parser skeleton.  Alternatively, if you modify or redistribute
   the parser skeleton itself, you may (at your option) remove this
   special exception, which will cause the skeleton and the resulting
   Bison output files to be licensed under the GNU General Public
   License without this special exception.

   This special exception was added by the Free Software Foundation in
   version 2.2 of Bison.  */

/* C LALR(1) parser skeleton written by Richard Stallman, by
   simplifying the original so-called "semantic" parser.  */

/* DO NOT RELY ON FEATURES THAT ARE NOT DOCUMENTED in the manual,
   especially those whose name start with YY_ or yy_.  They are
   private implementation details that can be changed or removed.  */

/* All symbols defined below should begin with yy or YY, to avoid
   infringing on user name space.  This should be done even for local
   variables, as they might otherwise be expanded by user macros.
   There are some unavoidable exceptions within include files to
   define necessary library symbols; they are noted "INFRINGES ON
   USER NAME SPACE" below.  */

/* Identify Bison output, and Bison version.  */
#define YYBISON 30802

/* Bison version string.  */
#define YYBISON_VERSION "3.8.2"

/* Skeleton name.  */
#define YYSKELETON_NAME "yacc.c"

/* Pure parsers.  */
#define YYPURE 2

/* Push parsers.  */
#define YYPUSH 0

/* Pull parsers.  */
#define YYPULL 1





# ifndef YY_CAST
#  ifdef __cplusplus
#   define YY_CAST(Type, Val) static_cast<Type> (Val)
#   define YY_REINTERPRET_CAST(Type, Val) reinterpret_cast<Type> (Val)
#  else
#   define YY_CAST(Type, Val) ((Type) (Val))
#   define YY_REINTERPRET_CAST(Type, Val) ((Type) (Val))
#  endif
# endif
# ifndef YY_NULLPTR
#  if defined __cplusplus
#   if 201103L <= __cplusplus
#    define YY_NULLPTR nullptr
#   else
#    define YY_NULLPTR 0
#   endif
#  else
#   define YY_NULLPTR ((void*)0)
#  endif
# endif

#include "parser.h"
/* Symbol kind.  */
enum yysymbol_kind_t
{
  YYSYMBOL_YYEMPTY = -2,
  YYSYMBOL_YYEOF = 0,                      /* "end of file"  */
  YYSYMBOL_YYerror = 1,                    /* error  */
  YYSYMBOL_YYUNDEF = 2,                    /* "invalid token"  */
  YYSYMBOL_IDENT = 3,                      /* "a name"  */
  YYSYMBOL_STRING = 4,                     /* "a string"  */
  YYSYMBOL_NUMBER = 5,                     /* "a number"  */
  YYSYMBOL_KW_MODEL = 6,                   /* "'model'"  */
  YYSYMBOL_KW_MEASURE = 7,                 /* "'measure'"  */
  YYSYMBOL_KW_VOXEL = 8,                   /* "'voxel'"  */
  YYSYMBOL_KW_PARAM = 9,                   /* "'param'"  */
  YYSYMBOL_KW_IN = 10,                     /* "'in'"  */
  YYSYMBOL_KW_INIT = 11,                   /* "'init'"  */
  YYSYMBOL_KW_PRIOR = 12,                  /* "'prior'"  */
  YYSYMBOL_KW_PERIODIC = 13,               /* "'periodic'"  */
  YYSYMBOL_KW_STEP = 14,                   /* "'step'"  */
  YYSYMBOL_KW_LET = 15,                    /* "'let'"  */
  YYSYMBOL_KW_CONSTRAINT = 16,             /* "'constraint'"  */
  YYSYMBOL_KW_SIGNAL = 17,                 /* "'signal'"  */
  YYSYMBOL_KW_DERIVATIVE = 18,             /* "'derivative'"  */
  YYSYMBOL_KW_OUTPUT = 19,                 /* "'output'"  */
  YYSYMBOL_LE = 20,                        /* "'<='"  */
  YYSYMBOL_GE = 21,                        /* "'>='"  */
  YYSYMBOL_EQ = 22,                        /* "'=='"  */
  YYSYMBOL_NE = 23,                        /* "'!='"  */
  YYSYMBOL_AND = 24,                       /* "'&&'"  */
  YYSYMBOL_OR = 25,                        /* "'||'"  */
  YYSYMBOL_26_ = 26,                       /* '='  */
  YYSYMBOL_27_ = 27,                       /* '['  */
  YYSYMBOL_28_ = 28,                       /* ']'  */
  YYSYMBOL_29_ = 29,                       /* ','  */
  YYSYMBOL_30_ = 30,                       /* '('  */
  YYSYMBOL_31_ = 31,                       /* ')'  */
  YYSYMBOL_32_ = 32,                       /* '?'  */
  YYSYMBOL_33_ = 33,                       /* ':'  */
  YYSYMBOL_34_ = 34,                       /* '<'  */
  YYSYMBOL_35_ = 35,                       /* '>'  */
  YYSYMBOL_36_ = 36,                       /* '+'  */
  YYSYMBOL_37_ = 37,                       /* '-'  */
  YYSYMBOL_38_ = 38,                       /* '*'  */
  YYSYMBOL_39_ = 39,                       /* '/'  */
  YYSYMBOL_40_ = 40,                       /* '!'  */
  YYSYMBOL_41_ = 41,                       /* '^'  */
  YYSYMBOL_YYACCEPT = 42,                  /* $accept  */
  YYSYMBOL_file = 43,                      /* file  */
  YYSYMBOL_statement = 44,                 /* statement  */
  YYSYMBOL_width = 45,                     /* width  */
  YYSYMBOL_source = 46,                    /* source  */
  YYSYMBOL_clauses = 47,                   /* clauses  */
  YYSYMBOL_open = 48,                      /* open  */
  YYSYMBOL_close = 49,                     /* close  */
  YYSYMBOL_args = 50,                      /* args  */
  YYSYMBOL_expr = 51,                      /* expr  */
  YYSYMBOL_ternary = 52,                   /* ternary  */
  YYSYMBOL_or = 53,                        /* or  */
  YYSYMBOL_and = 54,                       /* and  */
  YYSYMBOL_equality = 55,                  /* equality  */
  YYSYMBOL_relation = 56,                  /* relation  */
  YYSYMBOL_sum = 57,                       /* sum  */
  YYSYMBOL_product = 58,                   /* product  */
  YYSYMBOL_unary = 59,                     /* unary  */
  YYSYMBOL_power = 60,                     /* power  */
  YYSYMBOL_postfix = 61,                   /* postfix  */
  YYSYMBOL_primary = 62                    /* primary  */
};
typedef enum yysymbol_kind_t yysymbol_kind_t;



/* Unqualified %code blocks.  */
#line 21 "compiler/parser.y"

#include <stdio.h>
#include <string.h>
#include "builtins.h"

/* Deep enough for any sensible model; deeper input fails with a clear error rather than
 * growing the stack without end. */
#define YYMAXDEPTH 2000

/* A node starts where its first symbol starts. */
#define YYLLOC_DEFAULT(cur, rhs, n) ((cur) = (n) ? YYRHSLOC(rhs, 1) : YYRHSLOC(rhs, 0))

static void yyerror(YYLTYPE *loc, yyscan_t scanner, dm_parse_ctx *ctx, const char *msg);

static dm_expr *new_expr(dm_parse_ctx *ctx, dm_expr_kind kind, dm_loc loc, dm_expr *a,
                         dm_expr *b, dm_expr *c);
static dm_expr *new_num(dm_parse_ctx *ctx, dm_loc loc, double num);
static dm_expr *new_name(dm_parse_ctx *ctx, dm_loc loc, const char *name);
static dm_expr *new_op(dm_parse_ctx *ctx, dm_loc loc, int op, dm_expr *a, dm_expr *b);
static dm_expr *new_call(dm_parse_ctx *ctx, dm_loc loc, const char *name, dm_expr_list *args);
static dm_expr_list *new_list(dm_parse_ctx *ctx);
static void begin_statement(dm_parse_ctx *ctx);
static void model_statement(dm_parse_ctx *ctx, dm_loc loc, const char *name, const char *desc);
static dm_input *new_input(dm_parse_ctx *ctx, dm_loc loc, const char *name, int width);
static dm_param *new_param(dm_parse_ctx *ctx);
static int first_clause(dm_parse_ctx *ctx, dm_param *p, int already, dm_loc loc,
                        const char *clause);
static void set_prior(dm_parse_ctx *ctx, dm_param *p, dm_loc loc, const char *name,
                      dm_expr_list *args);
static void output_statement(dm_parse_ctx *ctx, dm_loc loc, const char *name,
                             const char *kind, dm_loc kind_loc, dm_expr *value);

#line 199 "build-asan/parser.c"

#ifdef short
# undef short
#endif

/* On compilers that do not define __PTRDIFF_MAX__ etc., make sure
   <limits.h> and (if available) <stdint.h> are included
   so that the code can choose integer types of a good width.  */

#ifndef __PTRDIFF_MAX__
# include <limits.h> /* INFRINGES ON USER NAME SPACE */
# if defined __STDC_VERSION__ && 199901 <= __STDC_VERSION__
#  include <stdint.h> /* INFRINGES ON USER NAME SPACE */
#  define YY_STDINT_H
# endif
#endif

/* Narrow types that promote to a signed type and that can represent a
   signed or unsigned integer of at least N bits.  In tables they can
   save space and decrease cache pressure.  Promoting to a signed type
   helps avoid bugs in integer arithmetic.  */

#ifdef __INT_LEAST8_MAX__
typedef __INT_LEAST8_TYPE__ yytype_int8;
#elif defined YY_STDINT_H
typedef int_least8_t yytype_int8;
#else
typedef signed char yytype_int8;
#endif

#ifdef __INT_LEAST16_MAX__
typedef __INT_LEAST16_TYPE__ yytype_int16;
#elif defined YY_STDINT_H
typedef int_least16_t yytype_int16;
#else
typedef short yytype_int16;
#endif

/* Work around bug in HP-UX 11.23, which defines these macros
   incorrectly for preprocessor constants.  This workaround can likely
   be removed in 2023, as HPE has promised support for HP-UX 11.23
   (aka HP-UX 11i v2) only through the end of 2022; see Table 2 of
   <https://h20195.www2.hpe.com/V2/getpdf.aspx/4AA4-7673ENW.pdf>.  */
#ifdef __hpux
# undef UINT_LEAST8_MAX
# undef UINT_LEAST16_MAX
# define UINT_LEAST8_MAX 255
# define UINT_LEAST16_MAX 65535
#endif

#if defined __UINT_LEAST8_MAX__ && __UINT_LEAST8_MAX__ <= __INT_MAX__
typedef __UINT_LEAST8_TYPE__ yytype_uint8;
#elif (!defined __UINT_LEAST8_MAX__ && defined YY_STDINT_H \
       && UINT_LEAST8_MAX <= INT_MAX)
typedef uint_least8_t yytype_uint8;
#elif !defined __UINT_LEAST8_MAX__ && UCHAR_MAX <= INT_MAX
typedef unsigned char yytype_uint8;
#else
typedef short yytype_uint8;
#endif

#if defined __UINT_LEAST16_MAX__ && __UINT_LEAST16_MAX__ <= __INT_MAX__
typedef __UINT_LEAST16_TYPE__ yytype_uint16;
#elif (!defined __UINT_LEAST16_MAX__ && defined YY_STDINT_H \
       && UINT_LEAST16_MAX <= INT_MAX)
typedef uint_least16_t yytype_uint16;
#elif !defined __UINT_LEAST16_MAX__ && USHRT_MAX <= INT_MAX
typedef unsigned short yytype_uint16;
#else
typedef int yytype_uint16;
#endif

#ifndef YYPTRDIFF_T
# if defined __PTRDIFF_TYPE__ && defined __PTRDIFF_MAX__
#  define YYPTRDIFF_T __PTRDIFF_TYPE__
#  define YYPTRDIFF_MAXIMUM __PTRDIFF_MAX__
# elif defined PTRDIFF_MAX
#  ifndef ptrdiff_t
#   include <stddef.h> /* INFRINGES ON USER NAME SPACE */
#  endif
#  define YYPTRDIFF_T ptrdiff_t
#  define YYPTRDIFF_MAXIMUM PTRDIFF_MAX
# else
#  define YYPTRDIFF_T long
#  define YYPTRDIFF_MAXIMUM LONG_MAX
# endif
#endif

#ifndef YYSIZE_T
# ifdef __SIZE_TYPE__
#  define YYSIZE_T __SIZE_TYPE__
# elif defined size_t
#  define YYSIZE_T size_t
# elif defined __STDC_VERSION__ && 199901 <= __STDC_VERSION__
#  include <stddef.h> /* INFRINGES ON USER NAME SPACE */
#  define YYSIZE_T size_t
# else
#  define YYSIZE_T unsigned
# endif
#endif

#define YYSIZE_MAXIMUM                                  \
  YY_CAST (YYPTRDIFF_T,                                 \
           (YYPTRDIFF_MAXIMUM < YY_CAST (YYSIZE_T, -1)  \
            ? YYPTRDIFF_MAXIMUM                         \
            : YY_CAST (YYSIZE_T, -1)))

#define YYSIZEOF(X) YY_CAST (YYPTRDIFF_T, sizeof (X))


/* Stored state numbers (used for stacks). */
typedef yytype_int8 yy_state_t;

/* State numbers in computations.  */
typedef int yy_state_fast_t;

#ifndef YY_
# if defined YYENABLE_NLS && YYENABLE_NLS
#  if ENABLE_NLS
#   include <libintl.h> /* INFRINGES ON USER NAME SPACE */
#   define YY_(Msgid) dgettext ("bison-runtime", Msgid)
#  endif
# endif
# ifndef YY_
#  define YY_(Msgid) Msgid
# endif
#endif


#ifndef YY_ATTRIBUTE_PURE
# if defined __GNUC__ && 2 < __GNUC__ + (96 <= __GNUC_MINOR__)
#  define YY_ATTRIBUTE_PURE __attribute__ ((__pure__))
# else
#  define YY_ATTRIBUTE_PURE
# endif
#endif

#ifndef YY_ATTRIBUTE_UNUSED
# if defined __GNUC__ && 2 < __GNUC__ + (7 <= __GNUC_MINOR__)
#  define YY_ATTRIBUTE_UNUSED __attribute__ ((__unused__))
# else
#  define YY_ATTRIBUTE_UNUSED
# endif
#endif

/* Suppress unused-variable warnings by "using" E.  */
#if ! defined lint || defined __GNUC__
# define YY_USE(E) ((void) (E))
#else
# define YY_USE(E) /* empty */
#endif

/* Suppress an incorrect diagnostic about yylval being uninitialized.  */
#if defined __GNUC__ && ! defined __ICC && 406 <= __GNUC__ * 100 + __GNUC_MINOR__
# if __GNUC__ * 100 + __GNUC_MINOR__ < 407
#  define YY_IGNORE_MAYBE_UNINITIALIZED_BEGIN                           \
    _Pragma ("GCC diagnostic push")                                     \
    _Pragma ("GCC diagnostic ignored \"-Wuninitialized\"")
# else
#  define YY_IGNORE_MAYBE_UNINITIALIZED_BEGIN                           \
    _Pragma ("GCC diagnostic push")                                     \
    _Pragma ("GCC diagnostic ignored \"-Wuninitialized\"")              \
    _Pragma ("GCC diagnostic ignored \"-Wmaybe-uninitialized\"")
# endif
# define YY_IGNORE_MAYBE_UNINITIALIZED_END      \
    _Pragma ("GCC diagnostic pop")
#else
# define YY_INITIAL_VALUE(Value) Value
#endif
#ifndef YY_IGNORE_MAYBE_UNINITIALIZED_BEGIN
# define YY_IGNORE_MAYBE_UNINITIALIZED_BEGIN
# define YY_IGNORE_MAYBE_UNINITIALIZED_END
#endif
#ifndef YY_INITIAL_VALUE
# define YY_INITIAL_VALUE(Value) /* Nothing. */
#endif

#if defined __cplusplus && defined __GNUC__ && ! defined __ICC && 6 <= __GNUC__
# define YY_IGNORE_USELESS_CAST_BEGIN                          \
    _Pragma ("GCC diagnostic push")                            \
    _Pragma ("GCC diagnostic ignored \"-Wuseless-cast\"")
# define YY_IGNORE_USELESS_CAST_END            \
    _Pragma ("GCC diagnostic pop")
#endif
#ifndef YY_IGNORE_USELESS_CAST_BEGIN
# define YY_IGNORE_USELESS_CAST_BEGIN
# define YY_IGNORE_USELESS_CAST_END
#endif


#define YY_ASSERT(E) ((void) (0 && (E)))

#if 1

/* The parser invokes alloca or malloc; define the necessary symbols.  */

# ifdef YYSTACK_ALLOC
   /* Pacify GCC's 'empty if-body' warning.  */
#  define YYSTACK_FREE(Ptr) do { /* empty */; } while (0)
#  ifndef YYSTACK_ALLOC_MAXIMUM
    /* The OS might guarantee only one guard page at the bottom of the stack,
       and a page size can be as small as 4096 bytes.  So we cannot safely
       invoke alloca (N) if N exceeds 4096.  Use a slightly smaller number
       to allow for a few compiler-allocated temporary stack slots.  */
#   define YYSTACK_ALLOC_MAXIMUM 4032 /* reasonable circa 2006 */
#  endif
# else
#  define YYSTACK_ALLOC YYMALLOC
#  define YYSTACK_FREE YYFREE
#  ifndef YYSTACK_ALLOC_MAXIMUM
#   define YYSTACK_ALLOC_MAXIMUM YYSIZE_MAXIMUM
#  endif
#  if (defined __cplusplus && ! defined EXIT_SUCCESS \
       && ! ((defined YYMALLOC || defined malloc) \
             && (defined YYFREE || defined free)))
#   include <stdlib.h> /* INFRINGES ON USER NAME SPACE */
#   ifndef EXIT_SUCCESS
#    define EXIT_SUCCESS 0
#   endif
#  endif
#  ifndef YYMALLOC
#   define YYMALLOC malloc
#   if ! defined malloc && ! defined EXIT_SUCCESS
void *malloc (YYSIZE_T); /* INFRINGES ON USER NAME SPACE */
#   endif
#  endif
#  ifndef YYFREE
#   define YYFREE free
#   if ! defined free && ! defined EXIT_SUCCESS
void free (void *); /* INFRINGES ON USER NAME SPACE */
#   endif
#  endif
# endif
# define YYCOPY_NEEDED 1
#endif /* 1 */

#if (! defined yyoverflow \
     && (! defined __cplusplus \
         || (defined YYLTYPE_IS_TRIVIAL && YYLTYPE_IS_TRIVIAL \
             && defined YYSTYPE_IS_TRIVIAL && YYSTYPE_IS_TRIVIAL)))

/* A type that is properly aligned for any stack member.  */
union yyalloc
{
  yy_state_t yyss_alloc;
  YYSTYPE yyvs_alloc;
  YYLTYPE yyls_alloc;
};

/* The size of the maximum gap between one aligned stack and the next.  */
# define YYSTACK_GAP_MAXIMUM (YYSIZEOF (union yyalloc) - 1)

/* The size of an array large to enough to hold all stacks, each with
   N elements.  */
# define YYSTACK_BYTES(N) \
     ((N) * (YYSIZEOF (yy_state_t) + YYSIZEOF (YYSTYPE) \
             + YYSIZEOF (YYLTYPE)) \
      + 2 * YYSTACK_GAP_MAXIMUM)

# define YYCOPY_NEEDED 1

/* Relocate STACK from its old location to the new one.  The
   local variables YYSIZE and YYSTACKSIZE give the old and new number of
   elements in the stack, and YYPTR gives the new location of the
   stack.  Advance YYPTR to a properly aligned location for the next
   stack.  */
# define YYSTACK_RELOCATE(Stack_alloc, Stack)                           \
    do                                                                  \
      {                                                                 \
        YYPTRDIFF_T yynewbytes;                                         \
        YYCOPY (&yyptr->Stack_alloc, Stack, yysize);                    \
        Stack = &yyptr->Stack_alloc;                                    \
        yynewbytes = yystacksize * YYSIZEOF (*Stack) + YYSTACK_GAP_MAXIMUM; \
        yyptr += yynewbytes / YYSIZEOF (*yyptr);                        \
      }                                                                 \
    while (0)

#endif

#if defined YYCOPY_NEEDED && YYCOPY_NEEDED
/* Copy COUNT objects from SRC to DST.  The source and destination do
   not overlap.  */
# ifndef YYCOPY
#  if defined __GNUC__ && 1 < __GNUC__
#   define YYCOPY(Dst, Src, Count) \
      __builtin_memcpy (Dst, Src, YY_CAST (YYSIZE_T, (Count)) * sizeof (*(Src)))
#  else
#   define YYCOPY(Dst, Src, Count)              \
      do                                        \
        {                                       \
          YYPTRDIFF_T yyi;                      \
          for (yyi = 0; yyi < (Count); yyi++)   \
            (Dst)[yyi] = (Src)[yyi];            \
        }                                       \
      while (0)
#  endif
# endif
#endif /* !YYCOPY_NEEDED */

/* YYFINAL -- State number of the termination state.  */
#define YYFINAL  2
/* YYLAST -- Last index in YYTABLE.  */
#define YYLAST   110

/* YYNTOKENS -- Number of terminals.  */
#define YYNTOKENS  42
/* YYNNTS -- Number of nonterminals.  */
#define YYNNTS  21
/* YYNRULES -- Number of rules.  */
#define YYNRULES  65
/* YYNSTATES -- Number of states.  */
#define YYNSTATES  124

/* YYMAXUTOK -- Last valid token kind.  */
#define YYMAXUTOK   280


/* YYTRANSLATE(TOKEN-NUM) -- Symbol number corresponding to TOKEN-NUM
   as returned by yylex, with out-of-bounds checking.  */
#define YYTRANSLATE(YYX)                                \
  (0 <= (YYX) && (YYX) <= YYMAXUTOK                     \
   ? YY_CAST (yysymbol_kind_t, yytranslate[YYX])        \
   : YYSYMBOL_YYUNDEF)

/* YYTRANSLATE[TOKEN-NUM] -- Symbol number corresponding to TOKEN-NUM
   as returned by yylex.  */
static const yytype_int8 yytranslate[] =
{
       0,     2,     2,     2,     2,     2,     2,     2,     2,     2,
       2,     2,     2,     2,     2,     2,     2,     2,     2,     2,
       2,     2,     2,     2,     2,     2,     2,     2,     2,     2,
       2,     2,     2,    40,     2,     2,     2,     2,     2,     2,
      30,    31,    38,    36,    29,    37,     2,    39,     2,     2,
       2,     2,     2,     2,     2,     2,     2,     2,    33,     2,
      34,    26,    35,    32,     2,     2,     2,     2,     2,     2,
       2,     2,     2,     2,     2,     2,     2,     2,     2,     2,
       2,     2,     2,     2,     2,     2,     2,     2,     2,     2,
       2,    27,     2,    28,    41,     2,     2,     2,     2,     2,
       2,     2,     2,     2,     2,     2,     2,     2,     2,     2,
       2,     2,     2,     2,     2,     2,     2,     2,     2,     2,
       2,     2,     2,     2,     2,     2,     2,     2,     2,     2,
       2,     2,     2,     2,     2,     2,     2,     2,     2,     2,
       2,     2,     2,     2,     2,     2,     2,     2,     2,     2,
       2,     2,     2,     2,     2,     2,     2,     2,     2,     2,
       2,     2,     2,     2,     2,     2,     2,     2,     2,     2,
       2,     2,     2,     2,     2,     2,     2,     2,     2,     2,
       2,     2,     2,     2,     2,     2,     2,     2,     2,     2,
       2,     2,     2,     2,     2,     2,     2,     2,     2,     2,
       2,     2,     2,     2,     2,     2,     2,     2,     2,     2,
       2,     2,     2,     2,     2,     2,     2,     2,     2,     2,
       2,     2,     2,     2,     2,     2,     2,     2,     2,     2,
       2,     2,     2,     2,     2,     2,     2,     2,     2,     2,
       2,     2,     2,     2,     2,     2,     2,     2,     2,     2,
       2,     2,     2,     2,     2,     2,     1,     2,     3,     4,
       5,     6,     7,     8,     9,    10,    11,    12,    13,    14,
      15,    16,    17,    18,    19,    20,    21,    22,    23,    24,
      25
};

#if YYDEBUG
/* YYRLINE[YYN] -- Source line where rule number YYN was defined.  */
static const yytype_int16 yyrline[] =
{
       0,    90,    90,    91,    95,    96,   103,   108,   116,   123,
     132,   140,   150,   159,   160,   161,   170,   171,   184,   185,
     190,   191,   202,   214,   215,   216,   222,   231,   232,   236,
     237,   241,   242,   247,   251,   252,   256,   257,   261,   262,
     267,   268,   269,   273,   274,   275,   276,   277,   281,   282,
     283,   287,   288,   289,   294,   295,   296,   300,   301,   305,
     306,   310,   311,   312,   313,   314
};
#endif

/** Accessing symbol of state STATE.  */
#define YY_ACCESSING_SYMBOL(State) YY_CAST (yysymbol_kind_t, yystos[State])

#if 1
/* The user-facing name of the symbol whose (internal) number is
   YYSYMBOL.  No bounds checking.  */
static const char *yysymbol_name (yysymbol_kind_t yysymbol) YY_ATTRIBUTE_UNUSED;

static const char *
yysymbol_name (yysymbol_kind_t yysymbol)
{
  static const char *const yy_sname[] =
  {
  "end of file", "error", "invalid token", "a name", "a string",
  "a number", "'model'", "'measure'", "'voxel'", "'param'", "'in'",
  "'init'", "'prior'", "'periodic'", "'step'", "'let'", "'constraint'",
  "'signal'", "'derivative'", "'output'", "'<='", "'>='", "'=='", "'!='",
  "'&&'", "'||'", "'='", "'['", "']'", "','", "'('", "')'", "'?'", "':'",
  "'<'", "'>'", "'+'", "'-'", "'*'", "'/'", "'!'", "'^'", "$accept",
  "file", "statement", "width", "source", "clauses", "open", "close",
  "args", "expr", "ternary", "or", "and", "equality", "relation", "sum",
  "product", "unary", "power", "postfix", "primary", YY_NULLPTR
  };
  return yy_sname[yysymbol];
}
#endif

#define YYPACT_NINF (-24)

#define yypact_value_is_default(Yyn) \
  ((Yyn) == YYPACT_NINF)

#define YYTABLE_NINF (-1)

#define yytable_value_is_error(Yyn) \
  0

/* YYPACT[STATE-NUM] -- Index in YYTABLE of the portion describing
   STATE-NUM.  */
static const yytype_int8 yypact[] =
{
     -24,    64,   -24,   -24,     4,     6,    13,    23,    44,    14,
      14,    49,    55,   -24,    56,    35,    35,   -24,    43,    48,
     -24,    14,    14,    14,   -24,   -24,   -22,    65,   -24,    45,
      -7,    36,   -24,   -24,   -21,   -24,   -24,    66,    -1,   -24,
      85,    67,    68,    26,    14,    19,    60,   -24,   -24,    14,
      14,    14,    14,    14,    14,    14,    14,    14,    14,    14,
      14,    14,    14,    14,    14,    70,    14,    69,    95,   -24,
      14,   -19,    14,    97,   -24,    14,   -24,   -24,    -8,   -24,
     -24,    65,    71,   -24,   -24,   -24,    40,    40,    40,    40,
      36,    36,   -24,   -24,    73,   -24,   -24,    14,   -24,   -24,
     -24,   -24,   -24,   -24,    14,   -24,    72,   -24,    14,   -24,
      14,   -24,   -24,    74,    14,   -24,   -24,    14,    17,   -13,
     -24,   -24,   -24,   -24
};

/* YYDEFACT[STATE-NUM] -- Default reduction number in state STATE-NUM.
   Performed when YYTABLE does not specify something else to do.  Zero
   means the default is an error.  */
static const yytype_int8 yydefact[] =
{
       2,     0,     1,    15,     0,     0,     0,     0,     0,     0,
       0,     0,     0,     3,     0,    16,    16,    20,     0,    62,
      61,     0,     0,     0,    10,    33,    34,    36,    38,    40,
      43,    48,    51,    54,    57,    59,    11,     0,     0,     4,
       0,    18,     6,     8,     0,     0,     0,    55,    56,     0,
       0,     0,     0,     0,     0,     0,     0,     0,     0,     0,
       0,     0,     0,     0,     0,     0,     0,     0,     0,     5,
       0,     0,     0,     0,    25,     0,     9,    63,     0,    31,
      65,    37,     0,    39,    41,    42,    46,    47,    44,    45,
      49,    50,    52,    53,     0,    58,    12,     0,    13,    17,
      19,     7,    28,    27,     0,    22,    23,    26,     0,    64,
       0,    60,    14,     0,     0,    32,    35,     0,     0,     0,
      24,    30,    29,    21
};

/* YYPGOTO[NTERM-NUM].  */
static const yytype_int8 yypgoto[] =
{
     -24,   -24,   -24,    89,   -24,   -24,   -24,   -24,    -5,    -9,
      -4,   -24,    58,    59,    32,   -23,    28,   -18,   -24,   -24,
     -24
};

/* YYDEFGOTO[NTERM-NUM].  */
static const yytype_int8 yydefgoto[] =
{
       0,     1,    13,    41,    69,    43,   104,   123,    78,    79,
      25,    26,    27,    28,    29,    30,    31,    32,    33,    34,
      35
};

/* YYTABLE[YYPACT[STATE-NUM]] -- What to do in state STATE-NUM.  If
   positive, shift that token.  If negative, reduce the rule whose
   number is the opposite.  If YYTABLE_NINF, syntax error.  */
static const yytype_int8 yytable[] =
{
      24,    36,    65,    49,    47,    48,    62,    14,   102,    15,
      50,   103,    46,    54,    55,   121,    16,    19,   122,    20,
      63,   108,    19,   109,    20,    66,    17,    56,    57,    58,
      59,    86,    87,    88,    89,    76,    71,    72,    73,    74,
      75,    82,    92,    93,    21,    95,   108,    18,   120,    21,
      77,    22,    37,    94,    23,    96,    22,    98,    38,    23,
      39,   101,    40,   105,     2,     3,   107,    52,    53,    44,
       4,     5,     6,     7,    60,    61,    58,    59,    45,     8,
       9,    10,    11,    12,    84,    85,    90,    91,   112,    51,
      67,    80,    64,    68,    70,   113,    97,    99,   100,   115,
     106,   111,   114,   117,   110,    42,   116,    81,   119,   118,
      83
};

static const yytype_int8 yycheck[] =
{
       9,    10,     3,    25,    22,    23,    27,     3,    27,     3,
      32,    30,    21,    20,    21,    28,     3,     3,    31,     5,
      41,    29,     3,    31,     5,    26,     3,    34,    35,    36,
      37,    54,    55,    56,    57,    44,    10,    11,    12,    13,
      14,    50,    60,    61,    30,    63,    29,     3,    31,    30,
      31,    37,     3,    62,    40,    64,    37,    66,     3,    40,
       4,    70,    27,    72,     0,     1,    75,    22,    23,    26,
       6,     7,     8,     9,    38,    39,    36,    37,    30,    15,
      16,    17,    18,    19,    52,    53,    58,    59,    97,    24,
       5,    31,    26,    26,    26,   104,    26,    28,     3,   108,
       3,    28,    30,    29,    33,    16,   110,    49,   117,   114,
      51
};

/* YYSTOS[STATE-NUM] -- The symbol kind of the accessing symbol of
   state STATE-NUM.  */
static const yytype_int8 yystos[] =
{
       0,    43,     0,     1,     6,     7,     8,     9,    15,    16,
      17,    18,    19,    44,     3,     3,     3,     3,     3,     3,
       5,    30,    37,    40,    51,    52,    53,    54,    55,    56,
      57,    58,    59,    60,    61,    62,    51,     3,     3,     4,
      27,    45,    45,    47,    26,    30,    51,    59,    59,    25,
      32,    24,    22,    23,    20,    21,    34,    35,    36,    37,
      38,    39,    27,    41,    26,     3,    26,     5,    26,    46,
      26,    10,    11,    12,    13,    14,    51,    31,    50,    51,
      31,    54,    51,    55,    56,    56,    57,    57,    57,    57,
      58,    58,    59,    59,    51,    59,    51,    26,    51,    28,
       3,    51,    27,    30,    48,    51,     3,    51,    29,    31,
      33,    28,    51,    51,    30,    51,    52,    29,    50,    51,
      31,    28,    31,    49
};

/* YYR1[RULE-NUM] -- Symbol kind of the left-hand side of rule RULE-NUM.  */
static const yytype_int8 yyr1[] =
{
       0,    42,    43,    43,    44,    44,    44,    44,    44,    44,
      44,    44,    44,    44,    44,    44,    45,    45,    46,    46,
      47,    47,    47,    47,    47,    47,    47,    48,    48,    49,
      49,    50,    50,    51,    52,    52,    53,    53,    54,    54,
      55,    55,    55,    56,    56,    56,    56,    56,    57,    57,
      57,    58,    58,    58,    59,    59,    59,    60,    60,    61,
      61,    62,    62,    62,    62,    62
};

/* YYR2[RULE-NUM] -- Number of symbols on the right-hand side of rule RULE-NUM.  */
static const yytype_int8 yyr2[] =
{
       0,     2,     0,     2,     3,     4,     3,     5,     3,     4,
       2,     2,     4,     4,     5,     1,     0,     3,     0,     2,
       0,     7,     3,     3,     6,     2,     3,     1,     1,     1,
       1,     1,     3,     1,     1,     5,     1,     3,     1,     3,
       1,     3,     3,     1,     3,     3,     3,     3,     1,     3,
       3,     1,     3,     3,     1,     2,     2,     1,     3,     1,
       4,     1,     1,     3,     4,     3
};


enum { YYENOMEM = -2 };

#define yyerrok         (yyerrstatus = 0)
#define yyclearin       (yychar = YYEMPTY)

#define YYACCEPT        goto yyacceptlab
#define YYABORT         goto yyabortlab
#define YYERROR         goto yyerrorlab
#define YYNOMEM         goto yyexhaustedlab


#define YYRECOVERING()  (!!yyerrstatus)

#define YYBACKUP(Token, Value)                                    \
  do                                                              \
    if (yychar == YYEMPTY)                                        \
      {                                                           \
        yychar = (Token);                                         \
        yylval = (Value);                                         \
        YYPOPSTACK (yylen);                                       \
        yystate = *yyssp;                                         \
        YY_LAC_DISCARD ("YYBACKUP");                              \
        goto yybackup;                                            \
      }                                                           \
    else                                                          \
      {                                                           \
        yyerror (&yylloc, scanner, ctx, YY_("syntax error: cannot back up")); \
        YYERROR;                                                  \
      }                                                           \
  while (0)

/* Backward compatibility with an undocumented macro.
   Use YYerror or YYUNDEF. */
#define YYERRCODE YYUNDEF

/* YYLLOC_DEFAULT -- Set CURRENT to span from RHS[1] to RHS[N].
   If N is 0, then set CURRENT to the empty location which ends
   the previous symbol: RHS[0] (always defined).  */

#ifndef YYLLOC_DEFAULT
# define YYLLOC_DEFAULT(Current, Rhs, N)                                \
    do                                                                  \
      if (N)                                                            \
        {                                                               \
          (Current).first_line   = YYRHSLOC (Rhs, 1).first_line;        \
          (Current).first_column = YYRHSLOC (Rhs, 1).first_column;      \
          (Current).last_line    = YYRHSLOC (Rhs, N).last_line;         \
          (Current).last_column  = YYRHSLOC (Rhs, N).last_column;       \
        }                                                               \
      else                                                              \
        {                                                               \
          (Current).first_line   = (Current).last_line   =              \
            YYRHSLOC (Rhs, 0).last_line;                                \
          (Current).first_column = (Current).last_column =              \
            YYRHSLOC (Rhs, 0).last_column;                              \
        }                                                               \
    while (0)
#endif

#define YYRHSLOC(Rhs, K) ((Rhs)[K])


/* Enable debugging if requested.  */
#if YYDEBUG

# ifndef YYFPRINTF
#  include <stdio.h> /* INFRINGES ON USER NAME SPACE */
#  define YYFPRINTF fprintf
# endif

# define YYDPRINTF(Args)                        \
do {                                            \
  if (yydebug)                                  \
    YYFPRINTF Args;                             \
} while (0)


/* YYLOCATION_PRINT -- Print the location on the stream.
   This macro was not mandated originally: define only if we know
   we won't break user code: when these are the locations we know.  */

# ifndef YYLOCATION_PRINT

#  if defined YY_LOCATION_PRINT

   /* Temporary convenience wrapper in case some people defined the
      undocumented and private YY_LOCATION_PRINT macros.  */
#   define YYLOCATION_PRINT(File, Loc)  YY_LOCATION_PRINT(File, *(Loc))

#  elif defined YYLTYPE_IS_TRIVIAL && YYLTYPE_IS_TRIVIAL

/* Print *YYLOCP on YYO.  Private, do not rely on its existence. */

YY_ATTRIBUTE_UNUSED
static int
yy_location_print_ (FILE *yyo, YYLTYPE const * const yylocp)
{
  int res = 0;
  int end_col = 0 != yylocp->last_column ? yylocp->last_column - 1 : 0;
  if (0 <= yylocp->first_line)
    {
      res += YYFPRINTF (yyo, "%d", yylocp->first_line);
      if (0 <= yylocp->first_column)
        res += YYFPRINTF (yyo, ".%d", yylocp->first_column);
    }
  if (0 <= yylocp->last_line)
    {
      if (yylocp->first_line < yylocp->last_line)
        {
          res += YYFPRINTF (yyo, "-%d", yylocp->last_line);
          if (0 <= end_col)
            res += YYFPRINTF (yyo, ".%d", end_col);
        }
      else if (0 <= end_col && yylocp->first_column < end_col)
        res += YYFPRINTF (yyo, "-%d", end_col);
    }
  return res;
}

#   define YYLOCATION_PRINT  yy_location_print_

    /* Temporary convenience wrapper in case some people defined the
       undocumented and private YY_LOCATION_PRINT macros.  */
#   define YY_LOCATION_PRINT(File, Loc)  YYLOCATION_PRINT(File, &(Loc))

#  else

#   define YYLOCATION_PRINT(File, Loc) ((void) 0)
    /* Temporary convenience wrapper in case some people defined the
       undocumented and private YY_LOCATION_PRINT macros.  */
#   define YY_LOCATION_PRINT  YYLOCATION_PRINT

#  endif
# endif /* !defined YYLOCATION_PRINT */


# define YY_SYMBOL_PRINT(Title, Kind, Value, Location)                    \
do {                                                                      \
  if (yydebug)                                                            \
    {                                                                     \
      YYFPRINTF (stderr, "%s ", Title);                                   \
      yy_symbol_print (stderr,                                            \
                  Kind, Value, Location, scanner, ctx); \
      YYFPRINTF (stderr, "\n");                                           \
    }                                                                     \
} while (0)


/*-----------------------------------.
| Print this symbol's value on YYO.  |
`-----------------------------------*/

static void
yy_symbol_value_print (FILE *yyo,
                       yysymbol_kind_t yykind, YYSTYPE const * const yyvaluep, YYLTYPE const * const yylocationp, yyscan_t scanner, dm_parse_ctx *ctx)
{
  FILE *yyoutput = yyo;
  YY_USE (yyoutput);
  YY_USE (yylocationp);
  YY_USE (scanner);
  YY_USE (ctx);
  if (!yyvaluep)
    return;
  YY_IGNORE_MAYBE_UNINITIALIZED_BEGIN
  YY_USE (yykind);
  YY_IGNORE_MAYBE_UNINITIALIZED_END
}


/*---------------------------.
| Print this symbol on YYO.  |
`---------------------------*/

static void
yy_symbol_print (FILE *yyo,
                 yysymbol_kind_t yykind, YYSTYPE const * const yyvaluep, YYLTYPE const * const yylocationp, yyscan_t scanner, dm_parse_ctx *ctx)
{
  YYFPRINTF (yyo, "%s %s (",
             yykind < YYNTOKENS ? "token" : "nterm", yysymbol_name (yykind));

  YYLOCATION_PRINT (yyo, yylocationp);
  YYFPRINTF (yyo, ": ");
  yy_symbol_value_print (yyo, yykind, yyvaluep, yylocationp, scanner, ctx);
  YYFPRINTF (yyo, ")");
}

/*------------------------------------------------------------------.
| yy_stack_print -- Print the state stack from its BOTTOM up to its |
| TOP (included).                                                   |
`------------------------------------------------------------------*/

static void
yy_stack_print (yy_state_t *yybottom, yy_state_t *yytop)
{
  YYFPRINTF (stderr, "Stack now");
  for (; yybottom <= yytop; yybottom++)
    {
      int yybot = *yybottom;
      YYFPRINTF (stderr, " %d", yybot);
    }
  YYFPRINTF (stderr, "\n");
}

# define YY_STACK_PRINT(Bottom, Top)                            \
do {                                                            \
  if (yydebug)                                                  \
    yy_stack_print ((Bottom), (Top));                           \
} while (0)


/*------------------------------------------------.
| Report that the YYRULE is going to be reduced.  |
`------------------------------------------------*/

static void
yy_reduce_print (yy_state_t *yyssp, YYSTYPE *yyvsp, YYLTYPE *yylsp,
                 int yyrule, yyscan_t scanner, dm_parse_ctx *ctx)
{
  int yylno = yyrline[yyrule];
  int yynrhs = yyr2[yyrule];
  int yyi;
  YYFPRINTF (stderr, "Reducing stack by rule %d (line %d):\n",
             yyrule - 1, yylno);
  /* The symbols being reduced.  */
  for (yyi = 0; yyi < yynrhs; yyi++)
    {
      YYFPRINTF (stderr, "   $%d = ", yyi + 1);
      yy_symbol_print (stderr,
                       YY_ACCESSING_SYMBOL (+yyssp[yyi + 1 - yynrhs]),
                       &yyvsp[(yyi + 1) - (yynrhs)],
                       &(yylsp[(yyi + 1) - (yynrhs)]), scanner, ctx);
      YYFPRINTF (stderr, "\n");
    }
}

# define YY_REDUCE_PRINT(Rule)          \
do {                                    \
  if (yydebug)                          \
    yy_reduce_print (yyssp, yyvsp, yylsp, Rule, scanner, ctx); \
} while (0)

/* Nonzero means print parse trace.  It is left uninitialized so that
   multiple parsers can coexist.  */
int yydebug;
#else /* !YYDEBUG */
# define YYDPRINTF(Args) ((void) 0)
# define YY_SYMBOL_PRINT(Title, Kind, Value, Location)
# define YY_STACK_PRINT(Bottom, Top)
# define YY_REDUCE_PRINT(Rule)
#endif /* !YYDEBUG */


/* YYINITDEPTH -- initial size of the parser's stacks.  */
#ifndef YYINITDEPTH
# define YYINITDEPTH 200
#endif

/* YYMAXDEPTH -- maximum size the stacks can grow to (effective only
   if the built-in stack extension method is used).

   Do not make this value too large; the results are undefined if
   YYSTACK_ALLOC_MAXIMUM < YYSTACK_BYTES (YYMAXDEPTH)
   evaluated with infinite-precision integer arithmetic.  */

#ifndef YYMAXDEPTH
# define YYMAXDEPTH 10000
#endif


/* Given a state stack such that *YYBOTTOM is its bottom, such that
   *YYTOP is either its top or is YYTOP_EMPTY to indicate an empty
   stack, and such that *YYCAPACITY is the maximum number of elements it
   can hold without a reallocation, make sure there is enough room to
   store YYADD more elements.  If not, allocate a new stack using
   YYSTACK_ALLOC, copy the existing elements, and adjust *YYBOTTOM,
   *YYTOP, and *YYCAPACITY to reflect the new capacity and memory
   location.  If *YYBOTTOM != YYBOTTOM_NO_FREE, then free the old stack
   using YYSTACK_FREE.  Return 0 if successful or if no reallocation is
   required.  Return YYENOMEM if memory is exhausted.  */
static int
yy_lac_stack_realloc (YYPTRDIFF_T *yycapacity, YYPTRDIFF_T yyadd,
#if YYDEBUG
                      char const *yydebug_prefix,
                      char const *yydebug_suffix,
#endif
                      yy_state_t **yybottom,
                      yy_state_t *yybottom_no_free,
                      yy_state_t **yytop, yy_state_t *yytop_empty)
{
  YYPTRDIFF_T yysize_old =
    *yytop == yytop_empty ? 0 : *yytop - *yybottom + 1;
  YYPTRDIFF_T yysize_new = yysize_old + yyadd;
  if (*yycapacity < yysize_new)
    {
      YYPTRDIFF_T yyalloc = 2 * yysize_new;
      yy_state_t *yybottom_new;
      /* Use YYMAXDEPTH for maximum stack size given that the stack
         should never need to grow larger than the main state stack
         needs to grow without LAC.  */
      if (YYMAXDEPTH < yysize_new)
        {
          YYDPRINTF ((stderr, "%smax size exceeded%s", yydebug_prefix,
                      yydebug_suffix));
          return YYENOMEM;
        }
      if (YYMAXDEPTH < yyalloc)
        yyalloc = YYMAXDEPTH;
      yybottom_new =
        YY_CAST (yy_state_t *,
                 YYSTACK_ALLOC (YY_CAST (YYSIZE_T,
                                         yyalloc * YYSIZEOF (*yybottom_new))));
      if (!yybottom_new)
        {
          YYDPRINTF ((stderr, "%srealloc failed%s", yydebug_prefix,
                      yydebug_suffix));
          return YYENOMEM;
        }
      if (*yytop != yytop_empty)
        {
          YYCOPY (yybottom_new, *yybottom, yysize_old);
          *yytop = yybottom_new + (yysize_old - 1);
        }
      if (*yybottom != yybottom_no_free)
        YYSTACK_FREE (*yybottom);
      *yybottom = yybottom_new;
      *yycapacity = yyalloc;
    }
  return 0;
}

/* Establish the initial context for the current lookahead if no initial
   context is currently established.

   We define a context as a snapshot of the parser stacks.  We define
   the initial context for a lookahead as the context in which the
   parser initially examines that lookahead in order to select a
   syntactic action.  Thus, if the lookahead eventually proves
   syntactically unacceptable (possibly in a later context reached via a
   series of reductions), the initial context can be used to determine
   the exact set of tokens that would be syntactically acceptable in the
   lookahead's place.  Moreover, it is the context after which any
   further semantic actions would be erroneous because they would be
   determined by a syntactically unacceptable token.

   YY_LAC_ESTABLISH should be invoked when a reduction is about to be
   performed in an inconsistent state (which, for the purposes of LAC,
   includes consistent states that don't know they're consistent because
   their default reductions have been disabled).  Iff there is a
   lookahead token, it should also be invoked before reporting a syntax
   error.  This latter case is for the sake of the debugging output.

   For parse.lac=full, the implementation of YY_LAC_ESTABLISH is as
   follows.  If no initial context is currently established for the
   current lookahead, then check if that lookahead can eventually be
   shifted if syntactic actions continue from the current context.
   Report a syntax error if it cannot.  */
#define YY_LAC_ESTABLISH                                                \
do {                                                                    \
  if (!yy_lac_established)                                              \
    {                                                                   \
      YYDPRINTF ((stderr,                                               \
                  "LAC: initial context established for %s\n",          \
                  yysymbol_name (yytoken)));                            \
      yy_lac_established = 1;                                           \
      switch (yy_lac (yyesa, &yyes, &yyes_capacity, yyssp, yytoken))    \
        {                                                               \
        case YYENOMEM:                                                  \
          YYNOMEM;                                                      \
        case 1:                                                         \
          goto yyerrlab;                                                \
        }                                                               \
    }                                                                   \
} while (0)

/* Discard any previous initial lookahead context because of Event,
   which may be a lookahead change or an invalidation of the currently
   established initial context for the current lookahead.

   The most common example of a lookahead change is a shift.  An example
   of both cases is syntax error recovery.  That is, a syntax error
   occurs when the lookahead is syntactically erroneous for the
   currently established initial context, so error recovery manipulates
   the parser stacks to try to find a new initial context in which the
   current lookahead is syntactically acceptable.  If it fails to find
   such a context, it discards the lookahead.  */
#if YYDEBUG
# define YY_LAC_DISCARD(Event)                                           \
do {                                                                     \
  if (yy_lac_established)                                                \
    {                                                                    \
      YYDPRINTF ((stderr, "LAC: initial context discarded due to "       \
                  Event "\n"));                                          \
      yy_lac_established = 0;                                            \
    }                                                                    \
} while (0)
#else
# define YY_LAC_DISCARD(Event) yy_lac_established = 0
#endif

/* Given the stack whose top is *YYSSP, return 0 iff YYTOKEN can
   eventually (after perhaps some reductions) be shifted, return 1 if
   not, or return YYENOMEM if memory is exhausted.  As preconditions and
   postconditions: *YYES_CAPACITY is the allocated size of the array to
   which *YYES points, and either *YYES = YYESA or *YYES points to an
   array allocated with YYSTACK_ALLOC.  yy_lac may overwrite the
   contents of either array, alter *YYES and *YYES_CAPACITY, and free
   any old *YYES other than YYESA.  */
static int
yy_lac (yy_state_t *yyesa, yy_state_t **yyes,
        YYPTRDIFF_T *yyes_capacity, yy_state_t *yyssp, yysymbol_kind_t yytoken)
{
  yy_state_t *yyes_prev = yyssp;
  yy_state_t *yyesp = yyes_prev;
  /* Reduce until we encounter a shift and thereby accept the token.  */
  YYDPRINTF ((stderr, "LAC: checking lookahead %s:", yysymbol_name (yytoken)));
  if (yytoken == YYSYMBOL_YYUNDEF)
    {
      YYDPRINTF ((stderr, " Always Err\n"));
      return 1;
    }
  while (1)
    {
      int yyrule = yypact[+*yyesp];
      if (yypact_value_is_default (yyrule)
          || (yyrule += yytoken) < 0 || YYLAST < yyrule
          || yycheck[yyrule] != yytoken)
        {
          /* Use the default action.  */
          yyrule = yydefact[+*yyesp];
          if (yyrule == 0)
            {
              YYDPRINTF ((stderr, " Err\n"));
              return 1;
            }
        }
      else
        {
          /* Use the action from yytable.  */
          yyrule = yytable[yyrule];
          if (yytable_value_is_error (yyrule))
            {
              YYDPRINTF ((stderr, " Err\n"));
              return 1;
            }
          if (0 < yyrule)
            {
              YYDPRINTF ((stderr, " S%d\n", yyrule));
              return 0;
            }
          yyrule = -yyrule;
        }
      /* By now we know we have to simulate a reduce.  */
      YYDPRINTF ((stderr, " R%d", yyrule - 1));
      {
        /* Pop the corresponding number of values from the stack.  */
        YYPTRDIFF_T yylen = yyr2[yyrule];
        /* First pop from the LAC stack as many tokens as possible.  */
        if (yyesp != yyes_prev)
          {
            YYPTRDIFF_T yysize = yyesp - *yyes + 1;
            if (yylen < yysize)
              {
                yyesp -= yylen;
                yylen = 0;
              }
            else
              {
                yyesp = yyes_prev;
                yylen -= yysize;
              }
          }
        /* Only afterwards look at the main stack.  */
        if (yylen)
          yyesp = yyes_prev -= yylen;
      }
      /* Push the resulting state of the reduction.  */
      {
        yy_state_fast_t yystate;
        {
          const int yylhs = yyr1[yyrule] - YYNTOKENS;
          const int yyi = yypgoto[yylhs] + *yyesp;
          yystate = (0 <= yyi && yyi <= YYLAST && yycheck[yyi] == *yyesp
                     ? yytable[yyi]
                     : yydefgoto[yylhs]);
        }
        if (yyesp == yyes_prev)
          {
            yyesp = *yyes;
            YY_IGNORE_USELESS_CAST_BEGIN
            *yyesp = YY_CAST (yy_state_t, yystate);
            YY_IGNORE_USELESS_CAST_END
          }
        else
          {
            if (yy_lac_stack_realloc (yyes_capacity, 1,
#if YYDEBUG
                                      " (", ")",
#endif
                                      yyes, yyesa, &yyesp, yyes_prev))
              {
                YYDPRINTF ((stderr, "\n"));
                return YYENOMEM;
              }
            YY_IGNORE_USELESS_CAST_BEGIN
            *++yyesp = YY_CAST (yy_state_t, yystate);
            YY_IGNORE_USELESS_CAST_END
          }
        YYDPRINTF ((stderr, " G%d", yystate));
      }
    }
}

/* Context of a parse error.  */
typedef struct
{
  yy_state_t *yyssp;
  yy_state_t *yyesa;
  yy_state_t **yyes;
  YYPTRDIFF_T *yyes_capacity;
  yysymbol_kind_t yytoken;
  YYLTYPE *yylloc;
} yypcontext_t;

/* Put in YYARG at most YYARGN of the expected tokens given the
   current YYCTX, and return the number of tokens stored in YYARG.  If
   YYARG is null, return the number of expected tokens (guaranteed to
   be less than YYNTOKENS).  Return YYENOMEM on memory exhaustion.
   Return 0 if there are more than YYARGN expected tokens, yet fill
   YYARG up to YYARGN. */
static int
yypcontext_expected_tokens (const yypcontext_t *yyctx,
                            yysymbol_kind_t yyarg[], int yyargn)
{
  /* Actual size of YYARG. */
  int yycount = 0;

  int yyx;
  for (yyx = 0; yyx < YYNTOKENS; ++yyx)
    {
      yysymbol_kind_t yysym = YY_CAST (yysymbol_kind_t, yyx);
      if (yysym != YYSYMBOL_YYerror && yysym != YYSYMBOL_YYUNDEF)
        switch (yy_lac (yyctx->yyesa, yyctx->yyes, yyctx->yyes_capacity, yyctx->yyssp, yysym))
          {
          case YYENOMEM:
            return YYENOMEM;
          case 1:
            continue;
          default:
            if (!yyarg)
              ++yycount;
            else if (yycount == yyargn)
              return 0;
            else
              yyarg[yycount++] = yysym;
          }
    }
  if (yyarg && yycount == 0 && 0 < yyargn)
    yyarg[0] = YYSYMBOL_YYEMPTY;
  return yycount;
}




/* The kind of the lookahead of this context.  */
static yysymbol_kind_t
yypcontext_token (const yypcontext_t *yyctx) YY_ATTRIBUTE_UNUSED;

static yysymbol_kind_t
yypcontext_token (const yypcontext_t *yyctx)
{
  return yyctx->yytoken;
}

/* The location of the lookahead of this context.  */
static YYLTYPE *
yypcontext_location (const yypcontext_t *yyctx) YY_ATTRIBUTE_UNUSED;

static YYLTYPE *
yypcontext_location (const yypcontext_t *yyctx)
{
  return yyctx->yylloc;
}

/* User defined function to report a syntax error.  */
static int
yyreport_syntax_error (const yypcontext_t *yyctx, yyscan_t scanner, dm_parse_ctx *ctx);

/*-----------------------------------------------.
| Release the memory associated to this symbol.  |
`-----------------------------------------------*/

static void
yydestruct (const char *yymsg,
            yysymbol_kind_t yykind, YYSTYPE *yyvaluep, YYLTYPE *yylocationp, yyscan_t scanner, dm_parse_ctx *ctx)
{
  YY_USE (yyvaluep);
  YY_USE (yylocationp);
  YY_USE (scanner);
  YY_USE (ctx);
  if (!yymsg)
    yymsg = "Deleting";
  YY_SYMBOL_PRINT (yymsg, yykind, yyvaluep, yylocationp);

  YY_IGNORE_MAYBE_UNINITIALIZED_BEGIN
  YY_USE (yykind);
  YY_IGNORE_MAYBE_UNINITIALIZED_END
}






/*----------.
| yyparse.  |
`----------*/

int
yyparse (yyscan_t scanner, dm_parse_ctx *ctx)
{
/* Lookahead token kind.  */
int yychar;


/* The semantic value of the lookahead symbol.  */
/* Default value used for initialization, for pacifying older GCCs
   or non-GCC compilers.  */
YY_INITIAL_VALUE (static YYSTYPE yyval_default;)
YYSTYPE yylval YY_INITIAL_VALUE (= yyval_default);

/* Location data for the lookahead symbol.  */
static YYLTYPE yyloc_default
# if defined YYLTYPE_IS_TRIVIAL && YYLTYPE_IS_TRIVIAL
  = { 1, 1, 1, 1 }
# endif
;
YYLTYPE yylloc = yyloc_default;

    /* Number of syntax errors so far.  */
    int yynerrs = 0;

    yy_state_fast_t yystate = 0;
    /* Number of tokens to shift before error messages enabled.  */
    int yyerrstatus = 0;

    /* Refer to the stacks through separate pointers, to allow yyoverflow
       to reallocate them elsewhere.  */

    /* Their size.  */
    YYPTRDIFF_T yystacksize = YYINITDEPTH;

    /* The state stack: array, bottom, top.  */
    yy_state_t yyssa[YYINITDEPTH];
    yy_state_t *yyss = yyssa;
    yy_state_t *yyssp = yyss;

    /* The semantic value stack: array, bottom, top.  */
    YYSTYPE yyvsa[YYINITDEPTH];
    YYSTYPE *yyvs = yyvsa;
    YYSTYPE *yyvsp = yyvs;

    /* The location stack: array, bottom, top.  */
    YYLTYPE yylsa[YYINITDEPTH];
    YYLTYPE *yyls = yylsa;
    YYLTYPE *yylsp = yyls;

    yy_state_t yyesa[20];
    yy_state_t *yyes = yyesa;
    YYPTRDIFF_T yyes_capacity = 20 < YYMAXDEPTH ? 20 : YYMAXDEPTH;

  /* Whether LAC context is established.  A Boolean.  */
  int yy_lac_established = 0;
  int yyn;
  /* The return value of yyparse.  */
  int yyresult;
  /* Lookahead symbol kind.  */
  yysymbol_kind_t yytoken = YYSYMBOL_YYEMPTY;
  /* The variables used to return semantic value and location from the
     action routines.  */
  YYSTYPE yyval;
  YYLTYPE yyloc;

  /* The locations where the error started and ended.  */
  YYLTYPE yyerror_range[3];



#define YYPOPSTACK(N)   (yyvsp -= (N), yyssp -= (N), yylsp -= (N))

  /* The number of symbols on the RHS of the reduced rule.
     Keep to zero when no symbol should be popped.  */
  int yylen = 0;

  YYDPRINTF ((stderr, "Starting parse\n"));

  yychar = YYEMPTY; /* Cause a token to be read.  */

  yylsp[0] = yylloc;
  goto yysetstate;


/*------------------------------------------------------------.
| yynewstate -- push a new state, which is found in yystate.  |
`------------------------------------------------------------*/
yynewstate:
  /* In all cases, when you get here, the value and location stacks
     have just been pushed.  So pushing a state here evens the stacks.  */
  yyssp++;


/*--------------------------------------------------------------------.
| yysetstate -- set current state (the top of the stack) to yystate.  |
`--------------------------------------------------------------------*/
yysetstate:
  YYDPRINTF ((stderr, "Entering state %d\n", yystate));
  YY_ASSERT (0 <= yystate && yystate < YYNSTATES);
  YY_IGNORE_USELESS_CAST_BEGIN
  *yyssp = YY_CAST (yy_state_t, yystate);
  YY_IGNORE_USELESS_CAST_END
  YY_STACK_PRINT (yyss, yyssp);

  if (yyss + yystacksize - 1 <= yyssp)
#if !defined yyoverflow && !defined YYSTACK_RELOCATE
    YYNOMEM;
#else
    {
      /* Get the current used size of the three stacks, in elements.  */
      YYPTRDIFF_T yysize = yyssp - yyss + 1;

# if defined yyoverflow
      {
        /* Give user a chance to reallocate the stack.  Use copies of
           these so that the &'s don't force the real ones into
           memory.  */
        yy_state_t *yyss1 = yyss;
        YYSTYPE *yyvs1 = yyvs;
        YYLTYPE *yyls1 = yyls;

        /* Each stack pointer address is followed by the size of the
           data in use in that stack, in bytes.  This used to be a
           conditional around just the two extra args, but that might
           be undefined if yyoverflow is a macro.  */
        yyoverflow (YY_("memory exhausted"),
                    &yyss1, yysize * YYSIZEOF (*yyssp),
                    &yyvs1, yysize * YYSIZEOF (*yyvsp),
                    &yyls1, yysize * YYSIZEOF (*yylsp),
                    &yystacksize);
        yyss = yyss1;
        yyvs = yyvs1;
        yyls = yyls1;
      }
# else /* defined YYSTACK_RELOCATE */
      /* Extend the stack our own way.  */
      if (YYMAXDEPTH <= yystacksize)
        YYNOMEM;
      yystacksize *= 2;
      if (YYMAXDEPTH < yystacksize)
        yystacksize = YYMAXDEPTH;

      {
        yy_state_t *yyss1 = yyss;
        union yyalloc *yyptr =
          YY_CAST (union yyalloc *,
                   YYSTACK_ALLOC (YY_CAST (YYSIZE_T, YYSTACK_BYTES (yystacksize))));
        if (! yyptr)
          YYNOMEM;
        YYSTACK_RELOCATE (yyss_alloc, yyss);
        YYSTACK_RELOCATE (yyvs_alloc, yyvs);
        YYSTACK_RELOCATE (yyls_alloc, yyls);
#  undef YYSTACK_RELOCATE
        if (yyss1 != yyssa)
          YYSTACK_FREE (yyss1);
      }
# endif

      yyssp = yyss + yysize - 1;
      yyvsp = yyvs + yysize - 1;
      yylsp = yyls + yysize - 1;

      YY_IGNORE_USELESS_CAST_BEGIN
      YYDPRINTF ((stderr, "Stack size increased to %ld\n",
                  YY_CAST (long, yystacksize)));
      YY_IGNORE_USELESS_CAST_END

      if (yyss + yystacksize - 1 <= yyssp)
        YYABORT;
    }
#endif /* !defined yyoverflow && !defined YYSTACK_RELOCATE */


  if (yystate == YYFINAL)
    YYACCEPT;

  goto yybackup;


/*-----------.
| yybackup.  |
`-----------*/
yybackup:
  /* Do appropriate processing given the current state.  Read a
     lookahead token if we need one and don't already have one.  */

  /* First try to decide what to do without reference to lookahead token.  */
  yyn = yypact[yystate];
  if (yypact_value_is_default (yyn))
    goto yydefault;

  /* Not known => get a lookahead token if don't already have one.  */

  /* YYCHAR is either empty, or end-of-input, or a valid lookahead.  */
  if (yychar == YYEMPTY)
    {
      YYDPRINTF ((stderr, "Reading a token\n"));
      yychar = yylex (&yylval, &yylloc, scanner);
    }

  if (yychar <= END)
    {
      yychar = END;
      yytoken = YYSYMBOL_YYEOF;
      YYDPRINTF ((stderr, "Now at end of input.\n"));
    }
  else if (yychar == YYerror)
    {
      /* The scanner already issued an error message, process directly
         to error recovery.  But do not keep the error token as
         lookahead, it is too special and may lead us to an endless
         loop in error recovery. */
      yychar = YYUNDEF;
      yytoken = YYSYMBOL_YYerror;
      yyerror_range[1] = yylloc;
      goto yyerrlab1;
    }
  else
    {
      yytoken = YYTRANSLATE (yychar);
      YY_SYMBOL_PRINT ("Next token is", yytoken, &yylval, &yylloc);
    }

  /* If the proper action on seeing token YYTOKEN is to reduce or to
     detect an error, take that action.  */
  yyn += yytoken;
  if (yyn < 0 || YYLAST < yyn || yycheck[yyn] != yytoken)
    {
      YY_LAC_ESTABLISH;
      goto yydefault;
    }
  yyn = yytable[yyn];
  if (yyn <= 0)
    {
      if (yytable_value_is_error (yyn))
        goto yyerrlab;
      yyn = -yyn;
      YY_LAC_ESTABLISH;
      goto yyreduce;
    }

  /* Count tokens shifted since error; after three, turn off error
     status.  */
  if (yyerrstatus)
    yyerrstatus--;

  /* Shift the lookahead token.  */
  YY_SYMBOL_PRINT ("Shifting", yytoken, &yylval, &yylloc);
  yystate = yyn;
  YY_IGNORE_MAYBE_UNINITIALIZED_BEGIN
  *++yyvsp = yylval;
  YY_IGNORE_MAYBE_UNINITIALIZED_END
  *++yylsp = yylloc;

  /* Discard the shifted token.  */
  yychar = YYEMPTY;
  YY_LAC_DISCARD ("shift");
  goto yynewstate;


/*-----------------------------------------------------------.
| yydefault -- do the default action for the current state.  |
`-----------------------------------------------------------*/
yydefault:
  yyn = yydefact[yystate];
  if (yyn == 0)
    goto yyerrlab;
  goto yyreduce;


/*-----------------------------.
| yyreduce -- do a reduction.  |
`-----------------------------*/
yyreduce:
  /* yyn is the number of a rule to reduce with.  */
  yylen = yyr2[yyn];

  /* If YYLEN is nonzero, implement the default value of the action:
     '$$ = $1'.

     Otherwise, the following line sets YYVAL to garbage.
     This behavior is undocumented and Bison
     users should not rely upon it.  Assigning to YYVAL
     unconditionally makes the parser a bit smaller, and it avoids a
     GCC warning that YYVAL may be used uninitialized.  */
  yyval = yyvsp[1-yylen];

  /* Default location. */
  YYLLOC_DEFAULT (yyloc, (yylsp - yylen), yylen);
  yyerror_range[1] = yyloc;
  YY_REDUCE_PRINT (yyn);
  {
    int yychar_backup = yychar;
    switch (yyn)
      {
  case 4: /* statement: "'model'" "a name" "a string"  */
#line 95 "compiler/parser.y"
                            { model_statement(ctx, (yylsp[-1]), (yyvsp[-1].str), (yyvsp[0].str)); }
#line 1660 "build-asan/parser.c"
    break;

  case 5: /* statement: "'measure'" "a name" width source  */
#line 97 "compiler/parser.y"
        {
            begin_statement(ctx);
            dm_input *in = new_input(ctx, (yylsp[-2]), (yyvsp[-2].str), (yyvsp[-1].ival));
            in->source = (yyvsp[0].str);
            dm_vec_push(ctx->m, ctx->m->measures, in);
        }
#line 1671 "build-asan/parser.c"
    break;

  case 6: /* statement: "'voxel'" "a name" width  */
#line 104 "compiler/parser.y"
        {
            begin_statement(ctx);
            dm_vec_push(ctx->m, ctx->m->voxels, new_input(ctx, (yylsp[-1]), (yyvsp[-1].str), (yyvsp[0].ival)));
        }
#line 1680 "build-asan/parser.c"
    break;

  case 7: /* statement: "'voxel'" "a name" width '=' expr  */
#line 109 "compiler/parser.y"
        {
            begin_statement(ctx);
            dm_input *in = new_input(ctx, (yylsp[-3]), (yyvsp[-3].str), (yyvsp[-2].ival));
            in->has_default = 1;
            in->default_expr = (yyvsp[0].expr);
            dm_vec_push(ctx->m, ctx->m->voxels, in);
        }
#line 1692 "build-asan/parser.c"
    break;

  case 8: /* statement: "'param'" "a name" clauses  */
#line 117 "compiler/parser.y"
        {
            begin_statement(ctx);
            (yyvsp[0].param)->name = (yyvsp[-1].str);
            (yyvsp[0].param)->loc = (yylsp[-1]);
            dm_vec_push(ctx->m, ctx->m->params, (yyvsp[0].param));
        }
#line 1703 "build-asan/parser.c"
    break;

  case 9: /* statement: "'let'" "a name" '=' expr  */
#line 124 "compiler/parser.y"
        {
            begin_statement(ctx);
            dm_let *let = dm_arena_alloc(ctx->m, sizeof *let);
            let->name = (yyvsp[-2].str);
            let->loc = (yylsp[-2]);
            let->value = (yyvsp[0].expr);
            dm_vec_push(ctx->m, ctx->m->lets, let);
        }
#line 1716 "build-asan/parser.c"
    break;

  case 10: /* statement: "'constraint'" expr  */
#line 133 "compiler/parser.y"
        {
            begin_statement(ctx);
            dm_constraint *c = dm_arena_alloc(ctx->m, sizeof *c);
            c->loc = (yylsp[0]);
            c->cond = (yyvsp[0].expr);
            dm_vec_push(ctx->m, ctx->m->constraints, c);
        }
#line 1728 "build-asan/parser.c"
    break;

  case 11: /* statement: "'signal'" expr  */
#line 141 "compiler/parser.y"
        {
            begin_statement(ctx);
            if (ctx->m->nsignals++ == 0) {
                ctx->m->signal = (yyvsp[0].expr);
                ctx->m->signal_loc = (yylsp[-1]);
            } else if (ctx->m->nsignals == 2) {
                ctx->m->extra_signal_loc = (yylsp[-1]);
            }
        }
#line 1742 "build-asan/parser.c"
    break;

  case 12: /* statement: "'derivative'" "a name" '=' expr  */
#line 151 "compiler/parser.y"
        {
            begin_statement(ctx);
            dm_let *d = dm_arena_alloc(ctx->m, sizeof *d);
            d->name = (yyvsp[-2].str);
            d->loc = (yylsp[-2]);
            d->value = (yyvsp[0].expr);
            dm_vec_push(ctx->m, ctx->m->derivatives, d);
        }
#line 1755 "build-asan/parser.c"
    break;

  case 13: /* statement: "'output'" "a name" '=' expr  */
#line 159 "compiler/parser.y"
                               { output_statement(ctx, (yylsp[-2]), (yyvsp[-2].str), NULL, (yylsp[-2]), (yyvsp[0].expr)); }
#line 1761 "build-asan/parser.c"
    break;

  case 14: /* statement: "'output'" "a name" "a name" '=' expr  */
#line 160 "compiler/parser.y"
                                     { output_statement(ctx, (yylsp[-3]), (yyvsp[-3].str), (yyvsp[-2].str), (yylsp[-2]), (yyvsp[0].expr)); }
#line 1767 "build-asan/parser.c"
    break;

  case 15: /* statement: error  */
#line 162 "compiler/parser.y"
        {
            /* Tokens are skipped up to the next statement keyword. */
            if (dm_diag_full(ctx->diag))
                YYABORT;
        }
#line 1777 "build-asan/parser.c"
    break;

  case 16: /* width: %empty  */
#line 170 "compiler/parser.y"
             { (yyval.ival) = 1; }
#line 1783 "build-asan/parser.c"
    break;

  case 17: /* width: '[' "a number" ']'  */
#line 172 "compiler/parser.y"
        {
            double w = (yyvsp[-1].num);
            if (!(w >= 1 && w <= DM_MAX_INPUT_WIDTH && w == (int)w)) {
                dm_error(ctx->diag, (yylsp[-1]), "the width must be an integer from 1 to %d",
                         DM_MAX_INPUT_WIDTH);
                w = 1;
            }
            (yyval.ival) = (int)w;
        }
#line 1797 "build-asan/parser.c"
    break;

  case 18: /* source: %empty  */
#line 184 "compiler/parser.y"
             { (yyval.str) = NULL; }
#line 1803 "build-asan/parser.c"
    break;

  case 19: /* source: '=' "a name"  */
#line 185 "compiler/parser.y"
                { (yyval.str) = (yyvsp[0].str); }
#line 1809 "build-asan/parser.c"
    break;

  case 20: /* clauses: %empty  */
#line 190 "compiler/parser.y"
             { (yyval.param) = new_param(ctx); }
#line 1815 "build-asan/parser.c"
    break;

  case 21: /* clauses: clauses "'in'" open expr ',' expr close  */
#line 192 "compiler/parser.y"
        {
            (yyval.param) = (yyvsp[-6].param);
            if (first_clause(ctx, (yyval.param), (yyval.param)->has_bounds, (yylsp[-5]), "in")) {
                (yyval.param)->has_bounds = 1;
                (yyval.param)->lo_closed = (yyvsp[-4].ival);
                (yyval.param)->lo_expr = (yyvsp[-3].expr);
                (yyval.param)->hi_expr = (yyvsp[-1].expr);
                (yyval.param)->hi_closed = (yyvsp[0].ival);
            }
        }
#line 1830 "build-asan/parser.c"
    break;

  case 22: /* clauses: clauses "'init'" expr  */
#line 203 "compiler/parser.y"
        {
            (yyval.param) = (yyvsp[-2].param);
            int already = (yyval.param)->init_expr != NULL || (yyval.param)->init_from_b0;
            if (first_clause(ctx, (yyval.param), already, (yylsp[-1]), "init")) {
                /* `init b0` is not an expression but a rule; b0 stays a free name. */
                if ((yyvsp[0].expr)->kind == DM_E_NAME && strcmp((yyvsp[0].expr)->name, "b0") == 0)
                    (yyval.param)->init_from_b0 = 1;
                else
                    (yyval.param)->init_expr = (yyvsp[0].expr);
            }
        }
#line 1846 "build-asan/parser.c"
    break;

  case 23: /* clauses: clauses "'prior'" "a name"  */
#line 214 "compiler/parser.y"
                             { (yyval.param) = (yyvsp[-2].param); set_prior(ctx, (yyval.param), (yylsp[0]), (yyvsp[0].str), NULL); }
#line 1852 "build-asan/parser.c"
    break;

  case 24: /* clauses: clauses "'prior'" "a name" '(' args ')'  */
#line 215 "compiler/parser.y"
                                          { (yyval.param) = (yyvsp[-5].param); set_prior(ctx, (yyval.param), (yylsp[-3]), (yyvsp[-3].str), (yyvsp[-1].list)); }
#line 1858 "build-asan/parser.c"
    break;

  case 25: /* clauses: clauses "'periodic'"  */
#line 217 "compiler/parser.y"
        {
            (yyval.param) = (yyvsp[-1].param);
            if (first_clause(ctx, (yyval.param), (yyval.param)->periodic, (yylsp[0]), "periodic"))
                (yyval.param)->periodic = 1;
        }
#line 1868 "build-asan/parser.c"
    break;

  case 26: /* clauses: clauses "'step'" expr  */
#line 223 "compiler/parser.y"
        {
            (yyval.param) = (yyvsp[-2].param);
            if (first_clause(ctx, (yyval.param), (yyval.param)->step_expr != NULL, (yylsp[-1]), "step"))
                (yyval.param)->step_expr = (yyvsp[0].expr);
        }
#line 1878 "build-asan/parser.c"
    break;

  case 27: /* open: '('  */
#line 231 "compiler/parser.y"
          { (yyval.ival) = 0; }
#line 1884 "build-asan/parser.c"
    break;

  case 28: /* open: '['  */
#line 232 "compiler/parser.y"
          { (yyval.ival) = 1; }
#line 1890 "build-asan/parser.c"
    break;

  case 29: /* close: ')'  */
#line 236 "compiler/parser.y"
          { (yyval.ival) = 0; }
#line 1896 "build-asan/parser.c"
    break;

  case 30: /* close: ']'  */
#line 237 "compiler/parser.y"
          { (yyval.ival) = 1; }
#line 1902 "build-asan/parser.c"
    break;

  case 31: /* args: expr  */
#line 241 "compiler/parser.y"
           { (yyval.list) = new_list(ctx); dm_vec_push(ctx->m, *(yyval.list), (yyvsp[0].expr)); }
#line 1908 "build-asan/parser.c"
    break;

  case 32: /* args: args ',' expr  */
#line 242 "compiler/parser.y"
                    { (yyval.list) = (yyvsp[-2].list); dm_vec_push(ctx->m, *(yyval.list), (yyvsp[0].expr)); }
#line 1914 "build-asan/parser.c"
    break;

  case 35: /* ternary: or '?' expr ':' ternary  */
#line 252 "compiler/parser.y"
                              { (yyval.expr) = new_expr(ctx, DM_E_TERNARY, (yylsp[-3]), (yyvsp[-4].expr), (yyvsp[-2].expr), (yyvsp[0].expr)); }
#line 1920 "build-asan/parser.c"
    break;

  case 37: /* or: or "'||'" and  */
#line 257 "compiler/parser.y"
                { (yyval.expr) = new_op(ctx, (yylsp[-1]), DM_OP_OR, (yyvsp[-2].expr), (yyvsp[0].expr)); }
#line 1926 "build-asan/parser.c"
    break;

  case 39: /* and: and "'&&'" equality  */
#line 262 "compiler/parser.y"
                       { (yyval.expr) = new_op(ctx, (yylsp[-1]), DM_OP_AND, (yyvsp[-2].expr), (yyvsp[0].expr)); }
#line 1932 "build-asan/parser.c"
    break;

  case 41: /* equality: relation "'=='" relation  */
#line 268 "compiler/parser.y"
                           { (yyval.expr) = new_op(ctx, (yylsp[-1]), DM_OP_EQ, (yyvsp[-2].expr), (yyvsp[0].expr)); }
#line 1938 "build-asan/parser.c"
    break;

  case 42: /* equality: relation "'!='" relation  */
#line 269 "compiler/parser.y"
                           { (yyval.expr) = new_op(ctx, (yylsp[-1]), DM_OP_NE, (yyvsp[-2].expr), (yyvsp[0].expr)); }
#line 1944 "build-asan/parser.c"
    break;

  case 44: /* relation: sum '<' sum  */
#line 274 "compiler/parser.y"
                  { (yyval.expr) = new_op(ctx, (yylsp[-1]), '<', (yyvsp[-2].expr), (yyvsp[0].expr)); }
#line 1950 "build-asan/parser.c"
    break;

  case 45: /* relation: sum '>' sum  */
#line 275 "compiler/parser.y"
                  { (yyval.expr) = new_op(ctx, (yylsp[-1]), '>', (yyvsp[-2].expr), (yyvsp[0].expr)); }
#line 1956 "build-asan/parser.c"
    break;

  case 46: /* relation: sum "'<='" sum  */
#line 276 "compiler/parser.y"
                 { (yyval.expr) = new_op(ctx, (yylsp[-1]), DM_OP_LE, (yyvsp[-2].expr), (yyvsp[0].expr)); }
#line 1962 "build-asan/parser.c"
    break;

  case 47: /* relation: sum "'>='" sum  */
#line 277 "compiler/parser.y"
                 { (yyval.expr) = new_op(ctx, (yylsp[-1]), DM_OP_GE, (yyvsp[-2].expr), (yyvsp[0].expr)); }
#line 1968 "build-asan/parser.c"
    break;

  case 49: /* sum: sum '+' product  */
#line 282 "compiler/parser.y"
                      { (yyval.expr) = new_op(ctx, (yylsp[-1]), '+', (yyvsp[-2].expr), (yyvsp[0].expr)); }
#line 1974 "build-asan/parser.c"
    break;

  case 50: /* sum: sum '-' product  */
#line 283 "compiler/parser.y"
                      { (yyval.expr) = new_op(ctx, (yylsp[-1]), '-', (yyvsp[-2].expr), (yyvsp[0].expr)); }
#line 1980 "build-asan/parser.c"
    break;

  case 52: /* product: product '*' unary  */
#line 288 "compiler/parser.y"
                        { (yyval.expr) = new_op(ctx, (yylsp[-1]), '*', (yyvsp[-2].expr), (yyvsp[0].expr)); }
#line 1986 "build-asan/parser.c"
    break;

  case 53: /* product: product '/' unary  */
#line 289 "compiler/parser.y"
                        { (yyval.expr) = new_op(ctx, (yylsp[-1]), '/', (yyvsp[-2].expr), (yyvsp[0].expr)); }
#line 1992 "build-asan/parser.c"
    break;

  case 55: /* unary: '-' unary  */
#line 295 "compiler/parser.y"
                { (yyval.expr) = new_expr(ctx, DM_E_UNARY, (yylsp[-1]), (yyvsp[0].expr), NULL, NULL); (yyval.expr)->op = '-'; }
#line 1998 "build-asan/parser.c"
    break;

  case 56: /* unary: '!' unary  */
#line 296 "compiler/parser.y"
                { (yyval.expr) = new_expr(ctx, DM_E_UNARY, (yylsp[-1]), (yyvsp[0].expr), NULL, NULL); (yyval.expr)->op = '!'; }
#line 2004 "build-asan/parser.c"
    break;

  case 58: /* power: postfix '^' unary  */
#line 301 "compiler/parser.y"
                        { (yyval.expr) = new_op(ctx, (yylsp[-1]), '^', (yyvsp[-2].expr), (yyvsp[0].expr)); }
#line 2010 "build-asan/parser.c"
    break;

  case 60: /* postfix: postfix '[' expr ']'  */
#line 306 "compiler/parser.y"
                           { (yyval.expr) = new_expr(ctx, DM_E_INDEX, (yylsp[-2]), (yyvsp[-3].expr), (yyvsp[-1].expr), NULL); }
#line 2016 "build-asan/parser.c"
    break;

  case 61: /* primary: "a number"  */
#line 310 "compiler/parser.y"
             { (yyval.expr) = new_num(ctx, (yylsp[0]), (yyvsp[0].num)); }
#line 2022 "build-asan/parser.c"
    break;

  case 62: /* primary: "a name"  */
#line 311 "compiler/parser.y"
            { (yyval.expr) = new_name(ctx, (yylsp[0]), (yyvsp[0].str)); }
#line 2028 "build-asan/parser.c"
    break;

  case 63: /* primary: "a name" '(' ')'  */
#line 312 "compiler/parser.y"
                    { (yyval.expr) = new_call(ctx, (yylsp[-2]), (yyvsp[-2].str), NULL); }
#line 2034 "build-asan/parser.c"
    break;

  case 64: /* primary: "a name" '(' args ')'  */
#line 313 "compiler/parser.y"
                         { (yyval.expr) = new_call(ctx, (yylsp[-3]), (yyvsp[-3].str), (yyvsp[-1].list)); }
#line 2040 "build-asan/parser.c"
    break;

  case 65: /* primary: '(' expr ')'  */
#line 314 "compiler/parser.y"
                   { (yyval.expr) = (yyvsp[-1].expr); }
#line 2046 "build-asan/parser.c"
    break;


#line 2050 "build-asan/parser.c"

        default: break;
      }
    if (yychar_backup != yychar)
      YY_LAC_DISCARD ("yychar change");
  }
  /* User semantic actions sometimes alter yychar, and that requires
     that yytoken be updated with the new translation.  We take the
     approach of translating immediately before every use of yytoken.
     One alternative is translating here after every semantic action,
     but that translation would be missed if the semantic action invokes
     YYABORT, YYACCEPT, or YYERROR immediately after altering yychar or
     if it invokes YYBACKUP.  In the case of YYABORT or YYACCEPT, an
     incorrect destructor might then be invoked immediately.  In the
     case of YYERROR or YYBACKUP, subsequent parser actions might lead
     to an incorrect destructor call or verbose syntax error message
     before the lookahead is translated.  */
  YY_SYMBOL_PRINT ("-> $$ =", YY_CAST (yysymbol_kind_t, yyr1[yyn]), &yyval, &yyloc);

  YYPOPSTACK (yylen);
  yylen = 0;

  *++yyvsp = yyval;
  *++yylsp = yyloc;

  /* Now 'shift' the result of the reduction.  Determine what state
     that goes to, based on the state we popped back to and the rule
     number reduced by.  */
  {
    const int yylhs = yyr1[yyn] - YYNTOKENS;
    const int yyi = yypgoto[yylhs] + *yyssp;
    yystate = (0 <= yyi && yyi <= YYLAST && yycheck[yyi] == *yyssp
               ? yytable[yyi]
               : yydefgoto[yylhs]);
  }

  goto yynewstate;


/*--------------------------------------.
| yyerrlab -- here on detecting error.  |
`--------------------------------------*/
yyerrlab:
  /* Make sure we have latest lookahead translation.  See comments at
     user semantic actions for why this is necessary.  */
  yytoken = yychar == YYEMPTY ? YYSYMBOL_YYEMPTY : YYTRANSLATE (yychar);
  /* If not already recovering from an error, report this error.  */
  if (!yyerrstatus)
    {
      ++yynerrs;
      {
        yypcontext_t yyctx
          = {yyssp, yyesa, &yyes, &yyes_capacity, yytoken, &yylloc};
        if (yychar != YYEMPTY)
          YY_LAC_ESTABLISH;
        if (yyreport_syntax_error (&yyctx, scanner, ctx) == 2)
          YYNOMEM;
      }
    }

  yyerror_range[1] = yylloc;
  if (yyerrstatus == 3)
    {
      /* If just tried and failed to reuse lookahead token after an
         error, discard it.  */

      if (yychar <= END)
        {
          /* Return failure if at end of input.  */
          if (yychar == END)
            YYABORT;
        }
      else
        {
          yydestruct ("Error: discarding",
                      yytoken, &yylval, &yylloc, scanner, ctx);
          yychar = YYEMPTY;
        }
    }

  /* Else will try to reuse lookahead token after shifting the error
     token.  */
  goto yyerrlab1;


/*---------------------------------------------------.
| yyerrorlab -- error raised explicitly by YYERROR.  |
`---------------------------------------------------*/
yyerrorlab:
  /* Pacify compilers when the user code never invokes YYERROR and the
     label yyerrorlab therefore never appears in user code.  */
  if (0)
    YYERROR;
  ++yynerrs;

  /* Do not reclaim the symbols of the rule whose action triggered
     this YYERROR.  */
  YYPOPSTACK (yylen);
  yylen = 0;
  YY_STACK_PRINT (yyss, yyssp);
  yystate = *yyssp;
  goto yyerrlab1;


/*-------------------------------------------------------------.
| yyerrlab1 -- common code for both syntax error and YYERROR.  |
`-------------------------------------------------------------*/
yyerrlab1:
  yyerrstatus = 3;      /* Each real token shifted decrements this.  */

  /* Pop stack until we find a state that shifts the error token.  */
  for (;;)
    {
      yyn = yypact[yystate];
      if (!yypact_value_is_default (yyn))
        {
          yyn += YYSYMBOL_YYerror;
          if (0 <= yyn && yyn <= YYLAST && yycheck[yyn] == YYSYMBOL_YYerror)
            {
              yyn = yytable[yyn];
              if (0 < yyn)
                break;
            }
        }

      /* Pop the current state because it cannot handle the error token.  */
      if (yyssp == yyss)
        YYABORT;

      yyerror_range[1] = *yylsp;
      yydestruct ("Error: popping",
                  YY_ACCESSING_SYMBOL (yystate), yyvsp, yylsp, scanner, ctx);
      YYPOPSTACK (1);
      yystate = *yyssp;
      YY_STACK_PRINT (yyss, yyssp);
    }

  /* If the stack popping above didn't lose the initial context for the
     current lookahead token, the shift below will for sure.  */
  YY_LAC_DISCARD ("error recovery");

  YY_IGNORE_MAYBE_UNINITIALIZED_BEGIN
  *++yyvsp = yylval;
  YY_IGNORE_MAYBE_UNINITIALIZED_END

  yyerror_range[2] = yylloc;
  ++yylsp;
  YYLLOC_DEFAULT (*yylsp, yyerror_range, 2);

  /* Shift the error token.  */
  YY_SYMBOL_PRINT ("Shifting", YY_ACCESSING_SYMBOL (yyn), yyvsp, yylsp);

  yystate = yyn;
  goto yynewstate;


/*-------------------------------------.
| yyacceptlab -- YYACCEPT comes here.  |
`-------------------------------------*/
yyacceptlab:
  yyresult = 0;
  goto yyreturnlab;


/*-----------------------------------.
| yyabortlab -- YYABORT comes here.  |
`-----------------------------------*/
yyabortlab:
  yyresult = 1;
  goto yyreturnlab;


/*-----------------------------------------------------------.
| yyexhaustedlab -- YYNOMEM (memory exhaustion) comes here.  |
`-----------------------------------------------------------*/
yyexhaustedlab:
  yyerror (&yylloc, scanner, ctx, YY_("memory exhausted"));
  yyresult = 2;
  goto yyreturnlab;


/*----------------------------------------------------------.
| yyreturnlab -- parsing is finished, clean up and return.  |
`----------------------------------------------------------*/
yyreturnlab:
  if (yychar != YYEMPTY)
    {
      /* Make sure we have latest lookahead translation.  See comments at
         user semantic actions for why this is necessary.  */
      yytoken = YYTRANSLATE (yychar);
      yydestruct ("Cleanup: discarding lookahead",
                  yytoken, &yylval, &yylloc, scanner, ctx);
    }
  /* Do not reclaim the symbols of the rule whose action triggered
     this YYABORT or YYACCEPT.  */
  YYPOPSTACK (yylen);
  YY_STACK_PRINT (yyss, yyssp);
  while (yyssp != yyss)
    {
      yydestruct ("Cleanup: popping",
                  YY_ACCESSING_SYMBOL (+*yyssp), yyvsp, yylsp, scanner, ctx);
      YYPOPSTACK (1);
    }
#ifndef yyoverflow
  if (yyss != yyssa)
    YYSTACK_FREE (yyss);
#endif
  if (yyes != yyesa)
    YYSTACK_FREE (yyes);

  return yyresult;
}

#line 317 "compiler/parser.y"


static void yyerror(YYLTYPE *loc, yyscan_t scanner, dm_parse_ctx *ctx, const char *msg)
{
    (void)scanner;
    if (strcmp(msg, "memory exhausted") == 0)
        dm_error(ctx->diag, *loc, "expression nested too deeply (the parser's stack is full)");
    else
        dm_error(ctx->diag, *loc, "%s", msg);
}

/* --- Syntax error messages ------------------------------------------------------------ */

static const yysymbol_kind_t statement_keywords[] = {
    YYSYMBOL_KW_MODEL, YYSYMBOL_KW_MEASURE, YYSYMBOL_KW_VOXEL, YYSYMBOL_KW_PARAM,
    YYSYMBOL_KW_LET, YYSYMBOL_KW_CONSTRAINT, YYSYMBOL_KW_SIGNAL, YYSYMBOL_KW_DERIVATIVE,
    YYSYMBOL_KW_OUTPUT,
};
#define NSTATEMENT_KEYWORDS (int)(sizeof statement_keywords / sizeof statement_keywords[0])

static int is_keyword(yysymbol_kind_t k)
{
    return k >= YYSYMBOL_KW_MODEL && k <= YYSYMBOL_KW_OUTPUT;
}

static int is_statement_keyword(yysymbol_kind_t k)
{
    for (int i = 0; i < NSTATEMENT_KEYWORDS; i++)
        if (statement_keywords[i] == k)
            return 1;
    return 0;
}

/* Tokens that continue an expression: listing them all would only be noise. */
static int is_operator(yysymbol_kind_t k)
{
    switch (k) {
    case YYSYMBOL_LE: case YYSYMBOL_GE: case YYSYMBOL_EQ: case YYSYMBOL_NE:
    case YYSYMBOL_AND: case YYSYMBOL_OR:
        return 1;
    default:
        break;
    }
    const char *name = yysymbol_name(k);
    return strlen(name) == 3 && name[0] == '\'' && strchr("+-*/^<>?[(", name[1]);
}

/* The keyword text, without its quotes. */
static void keyword_text(yysymbol_kind_t k, char *buf, size_t n)
{
    const char *name = yysymbol_name(k);
    size_t len = strlen(name);
    if (len >= 2 && name[0] == '\'')
        snprintf(buf, n, "%.*s", (int)(len - 2), name + 1);
    else
        snprintf(buf, n, "%s", name);
}

static void describe_lookahead(yysymbol_kind_t k, const dm_parse_ctx *ctx, char *buf, size_t n)
{
    if (k == YYSYMBOL_IDENT || k == YYSYMBOL_NUMBER)
        snprintf(buf, n, "'%s'", ctx->last_token);
    else
        snprintf(buf, n, "%s", yysymbol_name(k));
}

static int yyreport_syntax_error(const yypcontext_t *pctx, yyscan_t scanner, dm_parse_ctx *ctx)
{
    (void)scanner;
    /* A token right after a skipped bad character: that character is the mistake, already
     * reported; a second message about the same spot would only confuse. */
    if (ctx->token_after_bad_char)
        return 0;
    dm_loc loc = *yypcontext_location(pctx);
    yysymbol_kind_t look = yypcontext_token(pctx);
    yysymbol_kind_t expected[YYNTOKENS];
    int n = yypcontext_expected_tokens(pctx, expected, YYNTOKENS);
    if (n < 0)
        n = 0;

    char found[64], after[64] = "";
    describe_lookahead(look, ctx, found, sizeof found);
    if (ctx->prev_token[0])
        snprintf(after, sizeof after, " after '%s'", ctx->prev_token);

    int statement_expected = 0, expression_expected = 0, any_keyword = 0;
    for (int i = 0; i < n; i++) {
        statement_expected |= is_statement_keyword(expected[i]);
        expression_expected |= expected[i] == YYSYMBOL_NUMBER;
        any_keyword |= is_keyword(expected[i]);
    }

    /* A name where a keyword may stand: most likely a misspelt keyword. */
    if (look == YYSYMBOL_IDENT && any_keyword) {
        const char *names[YYNTOKENS + 1];
        char texts[YYNTOKENS][24];
        int nn = 0;
        for (int i = 0; i < n; i++)
            if (is_keyword(expected[i])) {
                keyword_text(expected[i], texts[nn], sizeof texts[nn]);
                names[nn] = texts[nn];
                nn++;
            }
        names[nn] = NULL;
        const char *near = dm_nearest_name(ctx->last_token, names);
        if (near) {
            dm_error(ctx->diag, loc, "unknown keyword '%s'; did you mean '%s'?", ctx->last_token,
                     near);
            return 0;
        }
        if (statement_expected && !expression_expected) {
            dm_error(ctx->diag, loc,
                     "'%s' does not begin a statement; a statement begins with model, measure, "
                     "voxel, param, let, constraint, signal, derivative or output",
                     ctx->last_token);
            return 0;
        }
    }

    if (look == YYSYMBOL_LE || look == YYSYMBOL_GE || look == YYSYMBOL_EQ || look == YYSYMBOL_NE
        || strcmp(yysymbol_name(look), "'<'") == 0 || strcmp(yysymbol_name(look), "'>'") == 0) {
        int comparison_expected = 0;
        for (int i = 0; i < n; i++)
            comparison_expected |= expected[i] == look;
        if (!comparison_expected) {
            dm_error(ctx->diag, loc, "comparisons do not chain; join them with && "
                     "(as in 'a < b && b < c')");
            return 0;
        }
    }

    /* List what could have come, leaving out operators and the statement keywords. */
    char list[256] = "";
    int items = 0;
    const char *item[YYNTOKENS];
    if (expression_expected)
        item[items++] = "an expression";
    for (int i = 0; i < n; i++) {
        yysymbol_kind_t k = expected[i];
        if (is_statement_keyword(k) || is_operator(k) || k == YYSYMBOL_YYEOF)
            continue;
        if (expression_expected &&
            (k == YYSYMBOL_NUMBER || k == YYSYMBOL_IDENT || strcmp(yysymbol_name(k), "'('") == 0
             || strcmp(yysymbol_name(k), "'-'") == 0 || strcmp(yysymbol_name(k), "'!'") == 0))
            continue;
        item[items++] = yysymbol_name(k);
    }
    if (items == 0 || items > 5) {
        dm_error(ctx->diag, loc, "unexpected %s%s", found, after);
        return 0;
    }
    for (int i = 0; i < items; i++) {
        size_t len = strlen(list);
        snprintf(list + len, sizeof list - len, "%s%s",
                 i == 0 ? "" : i == items - 1 ? " or " : ", ", item[i]);
    }
    dm_error(ctx->diag, loc, "expected %s%s, found %s", list, after, found);
    return 0;
}

/* --- Tree building -------------------------------------------------------------------- */

static int depth_of(const dm_expr *e)
{
    return e ? e->depth : 0;
}

static dm_expr *new_expr(dm_parse_ctx *ctx, dm_expr_kind kind, dm_loc loc, dm_expr *a,
                         dm_expr *b, dm_expr *c)
{
    dm_expr *e = dm_arena_alloc(ctx->m, sizeof *e);
    e->kind = kind;
    e->loc = loc;
    e->a = a;
    e->b = b;
    e->c = c;
    int d = depth_of(a);
    if (depth_of(b) > d)
        d = depth_of(b);
    if (depth_of(c) > d)
        d = depth_of(c);
    e->depth = d + 1;
    if (e->depth == DM_MAX_EXPR_DEPTH + 1)
        dm_error(ctx->diag, loc, "expression nested too deeply (more than %d levels)",
                 DM_MAX_EXPR_DEPTH);
    return e;
}

static dm_expr *new_num(dm_parse_ctx *ctx, dm_loc loc, double num)
{
    dm_expr *e = new_expr(ctx, DM_E_NUM, loc, NULL, NULL, NULL);
    e->num = num;
    return e;
}

static dm_expr *new_name(dm_parse_ctx *ctx, dm_loc loc, const char *name)
{
    dm_expr *e = new_expr(ctx, DM_E_NAME, loc, NULL, NULL, NULL);
    e->name = name;
    return e;
}

static dm_expr *new_op(dm_parse_ctx *ctx, dm_loc loc, int op, dm_expr *a, dm_expr *b)
{
    dm_expr *e = new_expr(ctx, DM_E_BINARY, loc, a, b, NULL);
    e->op = op;
    return e;
}

static dm_expr *new_call(dm_parse_ctx *ctx, dm_loc loc, const char *name, dm_expr_list *args)
{
    dm_expr *e = new_expr(ctx, DM_E_CALL, loc, NULL, NULL, NULL);
    e->name = name;
    if (args) {
        e->args = args->items;
        e->nargs = args->n;
        int d = 0;
        for (int i = 0; i < args->n; i++)
            if (args->items[i]->depth > d)
                d = args->items[i]->depth;
        e->depth = d + 1;
        if (e->depth == DM_MAX_EXPR_DEPTH + 1)
            dm_error(ctx->diag, loc, "expression nested too deeply (more than %d levels)",
                     DM_MAX_EXPR_DEPTH);
    }
    return e;
}

static dm_expr_list *new_list(dm_parse_ctx *ctx)
{
    return dm_arena_alloc(ctx->m, sizeof(dm_expr_list));
}

/* --- Statements ----------------------------------------------------------------------- */

static void begin_statement(dm_parse_ctx *ctx)
{
    ctx->nstatements++;
}

static void model_statement(dm_parse_ctx *ctx, dm_loc loc, const char *name, const char *desc)
{
    dm_model *m = ctx->m;
    if (m->name)
        dm_error(ctx->diag, loc, "repeated 'model' statement (the first is at line %d)",
                 m->name_loc.line);
    else if (ctx->nstatements > 0)
        dm_error(ctx->diag, loc, "'model' must be the first statement of the file");
    if (!m->name) {
        m->name = name;
        m->description = desc;
        m->name_loc = loc;
    }
    ctx->nstatements++;
}

static dm_input *new_input(dm_parse_ctx *ctx, dm_loc loc, const char *name, int width)
{
    dm_input *in = dm_arena_alloc(ctx->m, sizeof *in);
    in->name = name;
    in->loc = loc;
    in->width = width;
    return in;
}

static dm_param *new_param(dm_parse_ctx *ctx)
{
    return dm_arena_alloc(ctx->m, sizeof(dm_param));
}

/* Reports a repeated clause; returns 1 when this is the first. */
static int first_clause(dm_parse_ctx *ctx, dm_param *p, int already, dm_loc loc,
                        const char *clause)
{
    (void)p;
    if (already) {
        dm_error(ctx->diag, loc, "repeated '%s' clause in a parameter declaration", clause);
        return 0;
    }
    return 1;
}

static void set_prior(dm_parse_ctx *ctx, dm_param *p, dm_loc loc, const char *name,
                      dm_expr_list *args)
{
    if (!first_clause(ctx, p, p->prior.name != NULL, loc, "prior"))
        return;
    p->prior.name = name;
    p->prior.loc = loc;
    p->prior.nargs = args ? args->n : 0;
    for (int i = 0; i < p->prior.nargs && i < 2; i++)
        p->prior.args[i] = args->items[i];
}

static void output_statement(dm_parse_ctx *ctx, dm_loc loc, const char *name,
                             const char *kind, dm_loc kind_loc, dm_expr *value)
{
    begin_statement(ctx);
    dm_output *out = dm_arena_alloc(ctx->m, sizeof *out);
    out->name = name;
    out->loc = loc;
    out->value = value;
    out->kind = DM_OUT_SCALAR; /* the checker makes it a vector when the value is one */
    if (kind) {
        if (strcmp(kind, "axis") == 0) {
            out->kind = DM_OUT_AXIS;
        } else if (strcmp(kind, "vector") == 0) {
            out->kind = DM_OUT_VECTOR;
        } else {
            static const char *const kinds[] = {"axis", "vector", NULL};
            const char *near = dm_nearest_name(kind, kinds);
            if (near)
                dm_error(ctx->diag, kind_loc, "unknown output kind '%s'; did you mean '%s'?",
                         kind, near);
            else
                dm_error(ctx->diag, kind_loc,
                         "unknown output kind '%s'; expected 'axis', 'vector' or '='", kind);
        }
    }
    dm_vec_push(ctx->m, ctx->m->outputs, out);
}
