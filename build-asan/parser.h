/* A Bison parser, made by GNU Bison 3.8.2.  */

/* Bison interface for Yacc-like parsers in C

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

/* DO NOT RELY ON FEATURES THAT ARE NOT DOCUMENTED in the manual,
   especially those whose name start with YY_ or yy_.  They are
   private implementation details that can be changed or removed.  */

#ifndef YY_YY_BUILD_ASAN_PARSER_H_INCLUDED
# define YY_YY_BUILD_ASAN_PARSER_H_INCLUDED
/* Debug traces.  */
#ifndef YYDEBUG
# define YYDEBUG 0
#endif
#if YYDEBUG
extern int yydebug;
#endif
/* "%code requires" blocks.  */
#line 8 "compiler/parser.y"

#include "front.h"
#ifndef YY_TYPEDEF_YY_SCANNER_T
#define YY_TYPEDEF_YY_SCANNER_T
typedef void *yyscan_t;
#endif
typedef DM_VEC(dm_expr) dm_expr_list;

#line 58 "build-asan/parser.h"

/* Token kinds.  */
#ifndef YYTOKENTYPE
# define YYTOKENTYPE
  enum yytokentype
  {
    YYEMPTY = -2,
    END = 0,                       /* "end of file"  */
    YYerror = 256,                 /* error  */
    YYUNDEF = 257,                 /* "invalid token"  */
    IDENT = 258,                   /* "a name"  */
    STRING = 259,                  /* "a string"  */
    NUMBER = 260,                  /* "a number"  */
    KW_MODEL = 261,                /* "'model'"  */
    KW_MEASURE = 262,              /* "'measure'"  */
    KW_VOXEL = 263,                /* "'voxel'"  */
    KW_PARAM = 264,                /* "'param'"  */
    KW_IN = 265,                   /* "'in'"  */
    KW_INIT = 266,                 /* "'init'"  */
    KW_PRIOR = 267,                /* "'prior'"  */
    KW_PERIODIC = 268,             /* "'periodic'"  */
    KW_STEP = 269,                 /* "'step'"  */
    KW_LET = 270,                  /* "'let'"  */
    KW_CONSTRAINT = 271,           /* "'constraint'"  */
    KW_SIGNAL = 272,               /* "'signal'"  */
    KW_DERIVATIVE = 273,           /* "'derivative'"  */
    KW_OUTPUT = 274,               /* "'output'"  */
    LE = 275,                      /* "'<='"  */
    GE = 276,                      /* "'>='"  */
    EQ = 277,                      /* "'=='"  */
    NE = 278,                      /* "'!='"  */
    AND = 279,                     /* "'&&'"  */
    OR = 280                       /* "'||'"  */
  };
  typedef enum yytokentype yytoken_kind_t;
#endif

/* Value type.  */
#if ! defined YYSTYPE && ! defined YYSTYPE_IS_DECLARED
union YYSTYPE
{
#line 62 "compiler/parser.y"

    double num;
    char *str;
    int ival;
    dm_expr *expr;
    dm_expr_list *list;
    dm_param *param;

#line 109 "build-asan/parser.h"

};
typedef union YYSTYPE YYSTYPE;
# define YYSTYPE_IS_TRIVIAL 1
# define YYSTYPE_IS_DECLARED 1
#endif

/* Location type.  */
typedef dm_loc YYLTYPE;




int yyparse (yyscan_t scanner, dm_parse_ctx *ctx);

/* "%code provides" blocks.  */
#line 17 "compiler/parser.y"

int yylex(YYSTYPE *lval, YYLTYPE *lloc, yyscan_t scanner);

#line 130 "build-asan/parser.h"

#endif /* !YY_YY_BUILD_ASAN_PARSER_H_INCLUDED  */
