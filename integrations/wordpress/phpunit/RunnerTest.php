<?php
/**
 * Compresso_Runner::moved(): the lease's change to core's cron array (an event moved ahead, or added).
 *
 * @package Compresso
 */

use PHPUnit\Framework\TestCase;

final class RunnerTest extends TestCase {

	const HOOK = 'compresso_optimize_attachment';

	private static function event( array $args ) {
		return array(
			'schedule' => false,
			'args'     => $args,
		);
	}

	private static function key( array $args ) {
		return md5( serialize( $args ) ); // phpcs:ignore WordPress.PHP.DiscouragedPHPFunctions.serialize_serialize
	}

	public function test_moves_the_event_ahead_and_keeps_the_rest_of_its_slot() {
		$crons = array(
			100 => array(
				self::HOOK          => array(
					self::key( array( 7 ) ) => self::event( array( 7 ) ),
					self::key( array( 8 ) ) => self::event( array( 8 ) ),
				),
				'wp_version_check' => array( self::key( array() ) => self::event( array() ) ),
			),
			200 => array( 'wp_update_plugins' => array( self::key( array() ) => self::event( array() ) ) ),
		);
		$moved = Compresso_Runner::moved( $crons, self::HOOK, array( 7 ), 100, 460 );
		$this->assertSame( array( 100, 200, 460 ), array_keys( $moved ) );
		$this->assertSame( array( self::key( array( 8 ) ) ), array_keys( $moved[100][ self::HOOK ] ) );
		$this->assertArrayHasKey( 'wp_version_check', $moved[100] );
		$this->assertSame( array( self::HOOK => array( self::key( array( 7 ) ) => self::event( array( 7 ) ) ) ), $moved[460] );
	}

	public function test_an_emptied_slot_is_removed_and_the_schedule_stays_in_time_order() {
		$crons = array(
			100 => array( self::HOOK => array( self::key( array( 7 ) ) => self::event( array( 7 ) ) ) ),
			500 => array( 'wp_update_plugins' => array( self::key( array() ) => self::event( array() ) ) ),
		);
		$moved = Compresso_Runner::moved( $crons, self::HOOK, array( 7 ), 100, 460 );
		$this->assertSame( array( 460, 500 ), array_keys( $moved ) );
		// Brought forward again (an attachment queued while its event was leased).
		$back = Compresso_Runner::moved( $moved, self::HOOK, array( 7 ), 460, 50 );
		$this->assertSame( array( 50, 500 ), array_keys( $back ) );
	}

	public function test_an_event_no_longer_where_it_was_is_not_leased() {
		$crons = array( 100 => array( self::HOOK => array( self::key( array( 8 ) ) => self::event( array( 8 ) ) ) ) );
		$this->assertNull( Compresso_Runner::moved( $crons, self::HOOK, array( 7 ), 100, 460 ) );
		$this->assertNull( Compresso_Runner::moved( $crons, self::HOOK, array( 8 ), 99, 460 ) );
		$this->assertNull( Compresso_Runner::moved( array(), 'compresso_bulk_tick', array(), 100, 460 ) );
	}

	public function test_without_a_timestamp_the_event_is_added_beside_an_identical_one() {
		$crons = array( 900 => array( self::HOOK => array( self::key( array( 7 ) ) => self::event( array( 7 ) ) ) ) );
		$added = Compresso_Runner::moved( $crons, self::HOOK, array( 7 ), null, 460 );
		$this->assertSame( array( 460, 900 ), array_keys( $added ) );
		$this->assertSame( self::event( array( 7 ) ), $added[460][ self::HOOK ][ self::key( array( 7 ) ) ] );
		$this->assertSame( $crons[900], $added[900] );
	}
}
