<?php
/**
 * Compresso_Self_Test: the requests planned and the verdict on what came back.
 *
 * @package Compresso
 */

use PHPUnit\Framework\TestCase;

final class SelfTestTest extends TestCase {

	const URL = 'https://example.com/wp-content/uploads/2026/11/dune.jpg';

	/**
	 * The plan's checks, each answered as $answers[ key ] says (type, vary, cache; status 200).
	 */
	private static function answered( array $checks, array $answers ) {
		foreach ( $checks as $i => $check ) {
			$answer       = isset( $answers[ $check['key'] ] ) ? $answers[ $check['key'] ] : array();
			$checks[ $i ] = array_merge(
				$check,
				array(
					'status' => 200,
					'type'   => $check['expected'],
					'vary'   => 'Accept',
					'cache'  => '',
					'error'  => '',
				),
				$answer
			);
		}
		return $checks;
	}

	public function test_rewrite_plan_asks_as_each_browser_old_first_and_last_then_the_origin() {
		$checks = Compresso_Self_Test::plan( 'rewrite', self::URL, 'image/jpeg', array( 'webp', 'avif' ), 'n0nce' );
		$this->assertSame( array( 'legacy', 'webp', 'avif', 'legacy_again', 'origin' ), array_column( $checks, 'key' ) );
		$this->assertSame( array( 'image/jpeg', 'image/webp', 'image/avif', 'image/jpeg', 'image/avif' ), array_column( $checks, 'expected' ) );
		$this->assertSame( self::URL . '?compresso-self-test=n0nce', $checks[4]['url'] );
		foreach ( array_slice( $checks, 0, 4 ) as $check ) {
			$this->assertSame( self::URL, $check['url'] );
		}
		$this->assertStringNotContainsString( 'webp', $checks[0]['accept'] );
		$this->assertStringNotContainsString( 'avif', $checks[1]['accept'] );
		$this->assertStringContainsString( 'image/webp', $checks[1]['accept'] );
		$this->assertStringContainsString( 'image/avif', $checks[2]['accept'] );
	}

	public function test_rewrite_plan_without_an_avif_copy_expects_webp_for_avif_browsers() {
		$checks = Compresso_Self_Test::plan( 'rewrite', self::URL . '?ver=2', 'image/png', array( 'webp' ) );
		$this->assertSame( array( 'image/png', 'image/webp', 'image/webp', 'image/png', 'image/webp' ), array_column( $checks, 'expected' ) );
		$this->assertSame( self::URL . '?ver=2&compresso-self-test=x', $checks[4]['url'] );
		$only_avif = Compresso_Self_Test::plan( 'rewrite', self::URL, 'image/jpeg', array( 'avif' ) );
		$this->assertSame( array( 'legacy', 'avif', 'legacy_again', 'origin' ), array_column( $only_avif, 'key' ) );
	}

	public function test_picture_plan_asks_for_each_copy_by_its_own_url() {
		$checks = Compresso_Self_Test::plan( 'picture', self::URL, 'image/jpeg', array( 'webp', 'avif' ) );
		$this->assertSame( array( 'original', 'sibling_avif', 'sibling_webp' ), array_column( $checks, 'key' ) );
		$this->assertSame( array( self::URL, self::URL . '.avif', self::URL . '.webp' ), array_column( $checks, 'url' ) );
		$this->assertSame( array( 'image/jpeg', 'image/avif', 'image/webp' ), array_column( $checks, 'expected' ) );
	}

	public function test_rewrite_that_works() {
		$checks  = self::answered( Compresso_Self_Test::plan( 'rewrite', self::URL, 'image/jpeg', array( 'webp', 'avif' ) ), array() );
		$verdict = Compresso_Self_Test::verdict( 'rewrite', $checks );
		$this->assertSame( array( 'verdict' => 'rewrite_ok', 'ok' => true, 'switch' => false, 'failed' => array() ), $verdict );
	}

	public function test_rules_not_in_effect() {
		$jpeg   = array(
			'type' => 'image/jpeg',
			'vary' => '',
		);
		$checks = self::answered(
			Compresso_Self_Test::plan( 'rewrite', self::URL, 'image/jpeg', array( 'webp', 'avif' ) ),
			array(
				'legacy'       => $jpeg,
				'webp'         => $jpeg,
				'avif'         => $jpeg,
				'legacy_again' => $jpeg,
				'origin'       => $jpeg,
			)
		);
		$verdict = Compresso_Self_Test::verdict( 'rewrite', $checks );
		$this->assertSame( 'rewrite_not_active', $verdict['verdict'] );
		$this->assertFalse( $verdict['ok'] );
		$this->assertTrue( $verdict['switch'] );
	}

	public function test_a_cache_keyed_by_url_alone_warmed_by_an_old_browser() {
		$hit    = array(
			'type'  => 'image/jpeg',
			'cache' => 'x-cache: HIT',
		);
		$checks = self::answered(
			Compresso_Self_Test::plan( 'rewrite', self::URL, 'image/jpeg', array( 'webp', 'avif' ) ),
			array(
				'webp'         => $hit,
				'avif'         => $hit,
				'legacy_again' => $hit,
			)
		);
		$verdict = Compresso_Self_Test::verdict( 'rewrite', $checks );
		$this->assertSame( array( 'verdict' => 'cache_ignores_vary', 'ok' => false, 'switch' => true, 'failed' => array( 'webp', 'avif' ) ), $verdict );
	}

	public function test_a_cache_warmed_by_a_webp_browser_hands_webp_to_old_browsers() {
		$checks = self::answered(
			Compresso_Self_Test::plan( 'rewrite', self::URL, 'image/jpeg', array( 'webp' ) ),
			array(
				'legacy'       => array( 'type' => 'image/webp' ),
				'legacy_again' => array( 'type' => 'image/webp' ),
			)
		);
		$verdict = Compresso_Self_Test::verdict( 'rewrite', $checks );
		$this->assertSame( 'cache_ignores_vary', $verdict['verdict'] );
		$this->assertSame( array( 'legacy', 'legacy_again' ), $verdict['failed'] );
	}

	public function test_right_formats_without_vary_accept() {
		$checks  = self::answered(
			Compresso_Self_Test::plan( 'rewrite', self::URL, 'image/jpeg', array( 'webp' ) ),
			array( 'legacy' => array( 'vary' => 'Accept-Encoding' ) )
		);
		$verdict = Compresso_Self_Test::verdict( 'rewrite', $checks );
		$this->assertSame( array( 'verdict' => 'vary_missing', 'ok' => false, 'switch' => true, 'failed' => array( 'legacy' ) ), $verdict );
	}

	public function test_an_unreachable_site_is_reported_not_switched() {
		$checks  = self::answered(
			Compresso_Self_Test::plan( 'rewrite', self::URL, 'image/jpeg', array( 'webp' ) ),
			array(
				'webp' => array(
					'status' => 0,
					'type'   => '',
					'error'  => 'http_request_failed: cURL error 7',
				),
			)
		);
		$verdict = Compresso_Self_Test::verdict( 'rewrite', $checks );
		$this->assertSame( array( 'verdict' => 'unreachable', 'ok' => false, 'switch' => false, 'failed' => array( 'webp' ) ), $verdict );
		$not_found = self::answered( Compresso_Self_Test::plan( 'picture', self::URL, 'image/jpeg', array( 'webp' ) ), array( 'sibling_webp' => array( 'status' => 404 ) ) );
		$this->assertSame( 'unreachable', Compresso_Self_Test::verdict( 'picture', $not_found )['verdict'] );
	}

	public function test_picture_verdicts() {
		$plan = Compresso_Self_Test::plan( 'picture', self::URL, 'image/jpeg', array( 'webp' ) );
		$this->assertSame( array( 'verdict' => 'picture_ok', 'ok' => true, 'switch' => false, 'failed' => array() ), Compresso_Self_Test::verdict( 'picture', self::answered( $plan, array() ) ) );
		// No Vary is needed: each format has its own URL.
		$this->assertSame( 'picture_ok', Compresso_Self_Test::verdict( 'picture', self::answered( $plan, array( 'original' => array( 'vary' => '' ) ) ) )['verdict'] );
		$wrong = Compresso_Self_Test::verdict( 'picture', self::answered( $plan, array( 'sibling_webp' => array( 'type' => 'application/octet-stream' ) ) ) );
		$this->assertSame( array( 'verdict' => 'picture_wrong_type', 'ok' => false, 'switch' => false, 'failed' => array( 'sibling_webp' ) ), $wrong );
	}

	public function test_vary_header_parsing() {
		$this->assertTrue( Compresso_Self_Test::varies_on_accept( 'Accept' ) );
		$this->assertTrue( Compresso_Self_Test::varies_on_accept( 'Accept-Encoding, accept' ) );
		$this->assertTrue( Compresso_Self_Test::varies_on_accept( '*' ) );
		$this->assertFalse( Compresso_Self_Test::varies_on_accept( 'Accept-Encoding' ) );
		$this->assertFalse( Compresso_Self_Test::varies_on_accept( '' ) );
	}

	public function test_every_verdict_has_a_message_and_the_switch_is_told() {
		foreach ( array( 'picture_ok', 'picture_wrong_type', 'rewrite_ok', 'rewrite_not_active', 'cache_ignores_vary', 'rewrite_wrong_type', 'vary_missing', 'unreachable', 'no_sample', 'no_formats', 'off' ) as $verdict ) {
			$message = Compresso_Self_Test::message( $verdict, false );
			$this->assertNotSame( $verdict, $message );
			$this->assertStringNotContainsString( 'switched', $message );
		}
		$this->assertStringContainsString( 'switched delivery to <picture>', Compresso_Self_Test::message( 'cache_ignores_vary', true ) );
	}
}
