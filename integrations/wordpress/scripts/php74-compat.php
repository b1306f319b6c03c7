<?php
/**
 * PHP 7.4 compatibility check by tokens (PHP 7.4 itself cannot be installed here). Reads each file
 * given with PHP's own tokenizer (token_get_all, of the PHP running this script, 8.x) and reports
 * what PHP 7.4 cannot run: syntax added in PHP 8.0–8.4 and functions/classes added in PHP 8 (unless
 * the plugin itself declares the function, as a polyfill). Prints a JSON list of findings
 * {file, line, rule, code}; exits 1 when there is any.
 *
 * What it covers is listed in $rules below and in the package README; what it cannot see: the
 * behaviour changes between 7.4 and 8 (string-to-number comparison, warnings that became errors),
 * functions whose parameters were added in PHP 8, and anything decided at run time (a function name
 * in a variable, call_user_func with a string).
 *
 * Usage: php php74-compat.php file.php...
 *
 * @package Compresso
 */

// Functions added after PHP 7.4 (the version each came in is in the message).
$compresso_new_functions = array(
	'str_contains'                    => '8.0',
	'str_starts_with'                 => '8.0',
	'str_ends_with'                   => '8.0',
	'get_debug_type'                  => '8.0',
	'get_resource_id'                 => '8.0',
	'fdiv'                            => '8.0',
	'preg_last_error_msg'             => '8.0',
	'array_is_list'                   => '8.1',
	'enum_exists'                     => '8.1',
	'fsync'                           => '8.1',
	'fdatasync'                       => '8.1',
	'array_find'                      => '8.4',
	'array_find_key'                  => '8.4',
	'array_any'                       => '8.4',
	'array_all'                       => '8.4',
	'ini_parse_quantity'              => '8.2',
	'memory_reset_peak_usage'         => '8.2',
	'libxml_get_external_entity_loader' => '8.2',
	'json_validate'                   => '8.3',
	'mb_str_pad'                      => '8.3',
	'str_increment'                   => '8.3',
	'str_decrement'                   => '8.3',
	'mb_trim'                         => '8.4',
	'mb_ltrim'                        => '8.4',
	'mb_rtrim'                        => '8.4',
	'mb_ucfirst'                      => '8.4',
	'mb_lcfirst'                      => '8.4',
	'openssl_cipher_key_length'       => '8.2',
);
// Classes and interfaces added after PHP 7.4.
$compresso_new_classes = array(
	'weakmap'              => '8.0',
	'stringable'           => '8.0',
	'valueerror'           => '8.0',
	'unhandledmatcherror'  => '8.0',
	'phptoken'             => '8.0',
	'fiber'                => '8.1',
	'returntypewillchange' => '8.1',
	'random\\randomizer'   => '8.2',
	'sensitiveparameter'   => '8.2',
	'override'             => '8.3',
);

/**
 * @param string $file A PHP file.
 * @param array  $declared Functions the files declare (lower case).
 * @return array[] Findings.
 */
function compresso_compat_check( $file, array $declared, array $new_functions, array $new_classes ) {
	$tokens   = token_get_all( (string) file_get_contents( $file ), TOKEN_PARSE );
	$findings = array();
	$sig      = array(); // Significant tokens: no whitespace or comments.
	foreach ( $tokens as $token ) {
		if ( is_array( $token ) && in_array( $token[0], array( T_WHITESPACE, T_COMMENT, T_DOC_COMMENT ), true ) ) {
			continue;
		}
		$sig[] = is_array( $token ) ? $token : array( $token, $token, 0 );
	}
	$line = 1;
	foreach ( $sig as $i => $t ) {
		if ( $t[2] ) {
			$line = $t[2];
		}
		$sig[ $i ][2] = $line;
	}
	$add  = static function ( $rule, $t ) use ( &$findings, $file ) {
		$findings[] = array(
			'file' => $file,
			'line' => $t[2],
			'rule' => $rule,
			'code' => $t[1],
		);
	};
	$text = static function ( $t ) {
		return strtolower( ltrim( (string) $t[1], '\\' ) );
	};
	$is   = static function ( $t, $kind ) {
		return $t[0] === $kind;
	};
	$ident = static function ( $t ) {
		return is_string( $t[1] ) && preg_match( '/^\\\\?[A-Za-z_][A-Za-z0-9_\\\\]*$/', $t[1] ) && ! in_array( $t[0], array( T_VARIABLE, T_CONSTANT_ENCAPSED_STRING ), true );
	};
	$token_rules = array(
		'T_MATCH'                    => 'match expression (PHP 8.0)',
		'T_NULLSAFE_OBJECT_OPERATOR' => 'nullsafe operator ?-> (PHP 8.0)',
		'T_ATTRIBUTE'                => 'attribute #[...] (PHP 8.0)',
		'T_ENUM'                     => 'enum (PHP 8.1)',
		'T_READONLY'                 => 'readonly (PHP 8.1)',
		'T_PUBLIC_SET'               => 'asymmetric visibility (PHP 8.4)',
		'T_PROTECTED_SET'            => 'asymmetric visibility (PHP 8.4)',
		'T_PRIVATE_SET'              => 'asymmetric visibility (PHP 8.4)',
	);
	$kinds       = array();
	foreach ( $token_rules as $name => $rule ) {
		if ( defined( $name ) ) {
			$kinds[ constant( $name ) ] = $rule;
		}
	}
	$count = count( $sig );
	$depth = 0;
	// Stack of open brackets: what each '(' belongs to ('params' of a declaration, 'call', 'other').
	$stack = array();
	// Where a function declaration's signature is: 'params' while in its (...), 'return' after ':'.
	$signature      = null;
	$function_name  = '';
	$param_has_var  = false;
	$in_default     = false;
	for ( $i = 0; $i < $count; $i++ ) {
		$t    = $sig[ $i ];
		$prev = $i > 0 ? $sig[ $i - 1 ] : array( null, '', 0 );
		$next = $i + 1 < $count ? $sig[ $i + 1 ] : array( null, '', 0 );
		if ( isset( $kinds[ $t[0] ] ) ) {
			$add( $kinds[ $t[0] ], $t );
		}
		if ( T_LNUMBER === $t[0] && preg_match( '/^0[oO]/', $t[1] ) ) {
			$add( 'explicit octal 0o (PHP 8.1)', $t );
		}
		if ( T_VARIABLE === $t[0] && T_DOUBLE_COLON === $next[0] && isset( $sig[ $i + 2 ] ) && 'class' === strtolower( (string) $sig[ $i + 2 ][1] ) ) {
			$add( '$object::class (PHP 8.0)', $t );
		}
		if ( T_THROW === $t[0] && in_array( $prev[1], array( '??', '?', '=>', '=', ',', '(', '&&', '||', 'and', 'or' ), true ) ) {
			$add( 'throw as an expression (PHP 8.0)', $t );
		}
		if ( T_CATCH === $t[0] ) {
			$j = $i + 2;
			while ( $j < $count && ')' !== $sig[ $j ][1] && T_VARIABLE !== $sig[ $j ][0] ) {
				++$j;
			}
			if ( $j < $count && ')' === $sig[ $j ][1] ) {
				$add( 'catch without a variable (PHP 8.0)', $t );
			}
		}
		if ( T_CONST === $t[0] && $ident( $next ) && isset( $sig[ $i + 2 ] ) && ( $ident( $sig[ $i + 2 ] ) || '?' === $next[1] ) ) {
			$add( 'typed class constant (PHP 8.3)', $t );
		}
		if ( T_ELLIPSIS === $t[0] && '(' === $prev[1] && ')' === $next[1] ) {
			$add( 'first-class callable syntax f(...) (PHP 8.1)', $t );
		}
		if ( T_NEW === $t[0] && $ident( $next ) && isset( $new_classes[ $text( $next ) ] ) ) {
			$add( 'class ' . $next[1] . ' (PHP ' . $new_classes[ $text( $next ) ] . ')', $next );
		}
		if ( in_array( $t[0], array( T_EXTENDS, T_IMPLEMENTS, T_INSTANCEOF ), true ) && $ident( $next ) && isset( $new_classes[ $text( $next ) ] ) ) {
			$add( 'class ' . $next[1] . ' (PHP ' . $new_classes[ $text( $next ) ] . ')', $next );
		}
		// Property types: a union or mixed between the modifiers and the property's variable.
		if ( in_array( $t[0], array( T_PUBLIC, T_PROTECTED, T_PRIVATE, T_VAR ), true ) && 'params' !== end( $stack ) ) {
			for ( $j = $i + 1; $j < $count; $j++ ) {
				$u = $sig[ $j ];
				if ( T_VARIABLE === $u[0] || in_array( $u[0], array( T_FUNCTION, T_CONST ), true ) || in_array( $u[1], array( ';', '=', '{', '(' ), true ) ) {
					break;
				}
				if ( '|' === $u[1] ) {
					$add( 'union property type (PHP 8.0)', $u );
				} elseif ( $ident( $u ) && 'mixed' === strtolower( $u[1] ) ) {
					$add( 'mixed property type (PHP 8.0)', $u );
				}
			}
		}
		// A call of a function PHP 7.4 does not have (not a method, not a declaration).
		if ( $ident( $t ) && '(' === $next[1] && ! in_array( $prev[0], array( T_OBJECT_OPERATOR, T_DOUBLE_COLON, T_FUNCTION, T_NEW ), true )
			&& ( ! defined( 'T_NULLSAFE_OBJECT_OPERATOR' ) || T_NULLSAFE_OBJECT_OPERATOR !== $prev[0] ) ) {
			$name = $text( $t );
			if ( isset( $new_functions[ $name ] ) && ! isset( $declared[ $name ] ) ) {
				$add( $name . '() without a polyfill (PHP ' . $new_functions[ $name ] . ')', $t );
			}
		}
		// Named argument: an identifier and a single ':' right after '(' or ',' of a call.
		if ( $ident( $t ) && ':' === $next[1] && in_array( $prev[1], array( '(', ',' ), true ) && $stack && 'call' === end( $stack ) ) {
			$add( 'named argument (PHP 8.0)', $t );
		}
		// Function declarations: parameters and return type.
		if ( T_FUNCTION === $t[0] || ( defined( 'T_FN' ) && T_FN === $t[0] ) ) {
			$signature     = 'name';
			$function_name = $ident( $next ) ? strtolower( $next[1] ) : '';
		}
		if ( '(' === $t[1] ) {
			if ( 'name' === $signature ) {
				$stack[]       = 'params';
				$signature     = 'params';
				$param_has_var = false;
				$in_default    = false;
			} else {
				$stack[] = ( $ident( $prev ) || T_VARIABLE === $prev[0] || ')' === $prev[1] || ']' === $prev[1] ) && ! in_array( $prev[0], array( T_ARRAY, T_LIST, T_ISSET, T_EMPTY, T_IF, T_ELSEIF, T_WHILE, T_FOR, T_FOREACH, T_SWITCH, T_CATCH, T_DECLARE, T_USE ), true ) ? 'call' : 'other';
			}
			continue;
		}
		if ( ')' === $t[1] ) {
			$open = array_pop( $stack );
			if ( 'params' === $open ) {
				if ( ',' === $prev[1] ) {
					$add( 'trailing comma in a parameter list (PHP 8.0)', $prev );
				}
				$signature = ':' === $next[1] ? 'return' : null;
				if ( 'return' === $signature ) {
					++$i;
				}
			}
			continue;
		}
		if ( 'params' === $signature && 'params' === end( $stack ) ) {
			if ( in_array( $t[0], array( T_PUBLIC, T_PROTECTED, T_PRIVATE ), true ) && '__construct' === $function_name ) {
				$add( 'constructor property promotion (PHP 8.0)', $t );
			}
			if ( T_VARIABLE === $t[0] ) {
				$param_has_var = true;
			}
			if ( '=' === $t[1] ) {
				$in_default = true;
			}
			if ( ',' === $t[1] ) {
				$param_has_var = false;
				$in_default    = false;
			}
			if ( ! $param_has_var && ! $in_default ) {
				if ( '|' === $t[1] ) {
					$add( 'union type (PHP 8.0)', $t );
				}
				if ( $ident( $t ) && in_array( strtolower( $t[1] ), array( 'mixed', 'never' ), true ) ) {
					$add( strtolower( $t[1] ) . ' type (PHP 8.0+)', $t );
				}
				if ( defined( 'T_AMPERSAND_NOT_FOLLOWED_BY_VAR_OR_VARARG' ) && T_AMPERSAND_NOT_FOLLOWED_BY_VAR_OR_VARARG === $t[0] ) {
					$add( 'intersection type (PHP 8.1)', $t );
				}
			}
			if ( $in_default && T_NEW === $t[0] ) {
				$add( 'new in a default value (PHP 8.1)', $t );
			}
			continue;
		}
		if ( 'return' === $signature ) {
			if ( '{' === $t[1] || ';' === $t[1] || T_DOUBLE_ARROW === $t[0] ) {
				$signature = null;
			} elseif ( '|' === $t[1] ) {
				$add( 'union return type (PHP 8.0)', $t );
			} elseif ( '&' === $t[1] || ( defined( 'T_AMPERSAND_NOT_FOLLOWED_BY_VAR_OR_VARARG' ) && T_AMPERSAND_NOT_FOLLOWED_BY_VAR_OR_VARARG === $t[0] ) ) {
				$add( 'intersection return type (PHP 8.1)', $t );
			} elseif ( T_STATIC === $t[0] ) {
				$add( 'static return type (PHP 8.0)', $t );
			} elseif ( $ident( $t ) && in_array( strtolower( $t[1] ), array( 'mixed', 'never', 'null', 'false', 'true' ), true ) ) {
				$add( strtolower( $t[1] ) . ' return type (PHP 8.0+)', $t );
			}
		}
	}
	return $findings;
}

$compresso_files = array_slice( $argv, 1 );
// Functions the files declare themselves (function_exists-guarded polyfills count).
$compresso_declared = array();
foreach ( $compresso_files as $compresso_file ) {
	$compresso_tokens = token_get_all( (string) file_get_contents( $compresso_file ) );
	foreach ( $compresso_tokens as $compresso_i => $compresso_token ) {
		if ( is_array( $compresso_token ) && T_FUNCTION === $compresso_token[0] ) {
			for ( $compresso_j = $compresso_i + 1; isset( $compresso_tokens[ $compresso_j ] ); $compresso_j++ ) {
				$compresso_next = $compresso_tokens[ $compresso_j ];
				if ( is_array( $compresso_next ) && T_WHITESPACE === $compresso_next[0] ) {
					continue;
				}
				if ( is_array( $compresso_next ) && T_STRING === $compresso_next[0] ) {
					$compresso_declared[ strtolower( $compresso_next[1] ) ] = true;
				}
				break;
			}
		}
	}
}
$compresso_findings = array();
foreach ( $compresso_files as $compresso_file ) {
	try {
		$compresso_findings = array_merge( $compresso_findings, compresso_compat_check( $compresso_file, $compresso_declared, $compresso_new_functions, $compresso_new_classes ) );
	} catch ( ParseError $compresso_error ) {
		$compresso_findings[] = array(
			'file' => $compresso_file,
			'line' => $compresso_error->getLine(),
			'rule' => 'syntax error: ' . $compresso_error->getMessage(),
			'code' => '',
		);
	}
}
echo json_encode( $compresso_findings, JSON_PRETTY_PRINT | JSON_UNESCAPED_SLASHES ), "\n";
exit( $compresso_findings ? 1 : 0 );
